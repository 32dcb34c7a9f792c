"""README.md: its table of contents lists every section under the anchor GitHub gives it, and
its quick start holds the two commands CI runs (.ci/quickstart.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def github_anchor(title: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but '-' and '_' dropped, spaces
    as '-'."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def headings() -> list:
    """(level, title) of the README's ## and ### headings, outside code blocks."""
    text = re.sub(r"```.*?```", "", README, flags=re.S)
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(##+) (.+)$", text, re.M)
            if len(m.group(1)) <= 3 and m.group(2).strip() != "Contents"]


def test_the_table_of_contents_lists_every_section_in_order():
    expected = "\n".join(f"{'  ' * (level - 2)}- [{title}](#{github_anchor(title)})" for level, title in headings())
    contents = README.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0].strip()
    assert contents == expected, f"README.md's Contents should read:\n{expected}"


def test_the_quick_start_holds_the_commands_ci_runs():
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "quickstart.py")], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["pip install -e . && tvms run samples/mlp.tvms",
                   'pip install -e ".[test]" && python -m pytest -q -n auto']
    assert "bash -euo pipefail -c \"${quickstart[1]}\"" in (ROOT / ".ci" / "run").read_text()
