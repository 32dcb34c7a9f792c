"""Print the README's quick-start commands, one per line, in the order written.

They are the fenced ``sh`` blocks of the "Quick start" section that begin with ``pip install
-e``: the command that sets up and runs a sample, and the one that sets up and runs the tests.
CI runs them exactly as written, so the README cannot drift from what CI proves.
"""

import re
import sys
from pathlib import Path

readme = Path(__file__).resolve().parent.parent / "README.md"
section = readme.read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
commands = [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)
            if block.startswith("pip install -e")]
if len(commands) != 2 or any("\n" in c for c in commands):
    sys.exit(f"README.md's quick start should hold two one-line 'pip install -e' commands, found {commands!r}")
print("\n".join(commands))
