"""Make the README's pictures, with tvms installed (and Graphviz's ``dot``):

    python tools/pictures.py

* ``docs/images/mlp-dataflow.svg``: `tvms.relax.visualize` of samples/mlp.tvms after
  LegalizeOps, AnnotateTIROpPattern and FuseOps, so its two fused functions show as clusters;
* ``docs/images/mlp-trace.svg``: the Chrome trace of ``vm.profile`` of that model on the CPU
  (three calls), drawn as Perfetto lays it out: a row per track, a box per slice.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

import tvmscript as tvms
from tvmscript import relax

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
COLOURS = ["#4c8bf5", "#f5a54c", "#59b36b", "#c75bd1", "#e05d5d", "#4cc3c7"]


def dataflow() -> None:
    t = relax.transform
    mod = t.FuseOps()(t.AnnotateTIROpPattern()(t.LegalizeOps()(tvms.load(ROOT / "samples" / "mlp.tvms"))))
    relax.visualize(mod).save(str(OUT / "mlp-dataflow.svg"))


def trace_svg(trace: dict, width: int = 960) -> str:
    """A timeline of a Chrome trace's slices: a row per track, a labelled box per slice."""
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and "tid" in e}
    end = max(e["ts"] + e["dur"] for e in slices)
    left, row, top = 190, 34, 30
    scale = (width - left - 10) / end
    colour = {}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + row * len(names) + 30}" '
             'font-family="Helvetica" font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{left}" y="18" fill="#555">0 us</text>',
             f'<text x="{width - 10}" y="18" fill="#555" text-anchor="end">{end:.0f} us</text>']
    for i, (tid, name) in enumerate(sorted(names.items())):
        y = top + i * row
        parts.append(f'<text x="6" y="{y + 20}">{html.escape(name)}</text>')
        parts.append(f'<line x1="{left}" y1="{y + row - 2}" x2="{width - 10}" y2="{y + row - 2}" stroke="#ddd"/>')
        track = sorted((s for s in slices if s["tid"] == tid), key=lambda s: -s["dur"])  # nested ones on top
        for e in track:
            fill = colour.setdefault(e["name"], COLOURS[len(colour) % len(COLOURS)])
            x, w = left + e["ts"] * scale, max(e["dur"] * scale, 1.0)
            inner = any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in track)
            h, dy = (row - 18, 8) if inner else (row - 10, 4)
            parts.append(f'<rect x="{x:.1f}" y="{y + dy}" width="{w:.1f}" height="{h}" rx="2" fill="{fill}">'
                         f'<title>{html.escape(e["name"])}: {e["dur"]:.1f} us</title></rect>')
            if w > 7 * len(e["name"]):
                parts.append(f'<text x="{x + 3:.1f}" y="{y + 20}" fill="white">{html.escape(e["name"])}</text>')
    parts.append(f'<text x="{left}" y="{top + row * len(names) + 18}" fill="#555">vm.profile of samples/mlp.tvms '
                 'on the CPU, three calls (tvms run --profile --trace), as Perfetto shows it</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def trace() -> None:
    ex = tvms.compile(tvms.load(ROOT / "samples" / "mlp.tvms"), target="llvm")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(1, 784), (256, 784), (256,), (10, 256), (10,)]]
    report = vm.profile("main", *args, repeat=3)
    (OUT / "mlp-trace.svg").write_text(trace_svg(report.chrome_trace()))


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    dataflow()
    trace()
    print(f"wrote {OUT / 'mlp-dataflow.svg'} and {OUT / 'mlp-trace.svg'}")
