"""README.md and the documentation site: the README stays a short front page (at most
README_MAX_LINES lines) whose table of contents lists every section under the anchor GitHub
gives it, whose quick start holds the two commands CI runs (.ci/quickstart.py), and whose
relative links point at files that exist; every page of docs/ is in mkdocs.yml's nav, so the
site (built with `mkdocs build --strict` in CI) shows all of them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_MAX_LINES = 250


def github_anchor(title: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but '-' and '_' dropped, spaces
    as '-'."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def without_code(text: str) -> str:
    """Markdown text with its fenced code blocks and inline code spans removed."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def headings() -> list:
    """(level, title) of the README's ## and ### headings, outside code blocks."""
    text = re.sub(r"```.*?```", "", README, flags=re.S)
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(##+) (.+)$", text, re.M)
            if len(m.group(1)) <= 3 and m.group(2).strip() != "Contents"]


def relative_links(text: str) -> list:
    """The targets of the Markdown links and images in ``text`` that name a path in the
    repository (no scheme, not an anchor alone), without their '#fragment'."""
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code(text))
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def nav_pages(mkdocs_yml: str) -> list:
    """The pages mkdocs.yml's nav lists ('- Title: page.md' entries under 'nav:')."""
    nav = mkdocs_yml.split("\nnav:\n", 1)[1]
    nav = re.split(r"\n(?=\S)", nav, maxsplit=1)[0]  # up to the next top-level key
    return re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M)


def test_the_readme_is_short():
    lines = README.count("\n") + (not README.endswith("\n"))
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it at most {README_MAX_LINES} and move the rest into docs/")


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


def test_every_relative_link_of_the_readme_points_at_a_file():
    links = relative_links(README)
    assert any(link.startswith("docs/") for link in links), "README.md should link into docs/"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_every_docs_page_is_in_the_mkdocs_nav():
    nav = nav_pages((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert pages, "docs/ holds no pages"
    assert sorted(set(pages) - set(nav)) == [], "pages of docs/ that mkdocs.yml's nav leaves out"
    assert sorted(set(nav) - set(pages)) == [], "pages mkdocs.yml's nav lists that docs/ does not hold"


def test_the_helpers_see_what_they_should():
    """The helpers above find broken links and pages missing from the nav (so the tests that use
    them can fail), and ignore code, URLs and anchors."""
    text = ("[a](docs/x.md#y) ![b](img.png) [c](https://example.org/z.md) [d](#here)\n"
            "`[e](in/code.md)`\n```\n[f](in/block.md)\n```\n")
    assert relative_links(text) == ["docs/x.md", "img.png"]
    yml = "site_name: x\nnav:\n  - Home: index.md\n  - Guide:\n    - One: guide/one.md\ntheme:\n  name: mkdocs\n"
    assert nav_pages(yml) == ["index.md", "guide/one.md"]
