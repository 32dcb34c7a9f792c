"""What a wheel of tvms holds (pyproject.toml's [tool.setuptools]): every package and data file.

compiler/, runtime/ and grammar/ are mapped into the package `tvmscript` by ``package-dir``,
and the packages are listed by hand, so a new subpackage left off the list works in the
editable checkout and is missing from the wheel (as tvmscript.relax.frontend.onnx.ops was).
These tests compare the list with the folders; .ci/wheel builds the wheel and runs it.
"""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def packages_in_folders(mapping: dict) -> dict:
    """Package name -> folder, for every folder with an ``__init__.py`` under a mapped root."""
    found = {}
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found[".".join((package, *rel.parts))] = init.parent
    return found


def test_every_package_is_in_the_wheel():
    config = setuptools_config()
    found = packages_in_folders(config["package-dir"])
    listed = set(config["packages"])
    assert sorted(set(found) - listed) == [], "packages missing from pyproject.toml's [tool.setuptools] packages"
    assert sorted(listed - set(found)) == [], "packages listed that have no folder"


def test_every_data_file_is_in_the_wheel():
    """A file of a package that is not Python (the grammar) must match its package-data."""
    config = setuptools_config()
    data = config.get("package-data", {})
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for package, folder in packages_in_folders(config["package-dir"]).items():
        for path in tracked:
            p = ROOT / path
            if p.parent != folder or p.suffix in (".py", ".pyi"):
                continue
            if not any(fnmatch.fnmatch(p.name, pattern) for pattern in data.get(package, [])):
                missing.append(path)
    assert missing == [], "files of a package that its package-data leaves out of the wheel"
