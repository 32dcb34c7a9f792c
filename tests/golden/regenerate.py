"""Regenerate tests/golden/samples/<name>.tvms: the canonical print of every sample in samples/
whose source is not already canonical (old-dialect and hand-written programs, see
samples/README.md).

Run it only after checking the diff by eye: these files are what tests/language/test_roundtrip.py holds
the printer to, so regenerating them after a printer change accepts that change. Compare each
changed file with what Apache TVM's classic printer writes (tools/tvm_reference_out_0.25/ shows
real TVM printouts of most constructs) before committing it.

    python tests/golden/regenerate.py          # rewrite the goldens
    python tests/golden/regenerate.py --check  # exit 1 if any golden is out of date
    git diff tests/golden/samples/             # then read the diff
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
OUT = pathlib.Path(__file__).resolve().parent / "samples"


def canonical_prints() -> dict[str, str]:
    """``{name: canonical print}`` for each parseable sample whose print differs from its source."""
    import tvmscript as tvms

    out = {}
    for path in sorted(SAMPLES.glob("*.tvms")):
        source = path.read_text()
        try:
            printed = tvms.parse(source, str(path)).script()
        except tvms.TVMScriptError:
            continue  # the samples that cannot parse are tested for their diagnostic instead
        if printed != source:
            out[path.stem] = printed
    return out


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    check = "--check" in argv
    prints = canonical_prints()
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, text in prints.items():
        target = OUT / f"{name}.tvms"
        if not target.exists() or target.read_text() != text:
            stale.append(target)
            if not check:
                target.write_text(text)
    extra = [p for p in OUT.glob("*.tvms") if p.stem not in prints]
    for p in extra:
        stale.append(p)
        if not check:
            p.unlink()
    for p in stale:
        print(("stale: " if check else "updated: ") + str(p.relative_to(ROOT)))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
