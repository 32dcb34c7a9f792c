"""tvms in a notebook: IR nodes and profiles display as HTML, and samples/notebooks/tour.ipynb
runs end to end in a Jupyter kernel (nbclient), its outputs checked, none stored."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

import tvmscript as tvms
from tvmscript.runtime.vm import ProfileReport

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "samples" / "notebooks" / "tour.ipynb"


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


@pytest.mark.parametrize("part", ["module", "prim_func", "relax_function"])
def test_ir_displays_as_highlighted_tvmscript(part):
    mod = tvms.load(ROOT / "samples" / "e2e_mlp.tvms")
    node = {"module": mod, "prim_func": mod["relu0"], "relax_function": mod["main"]}[part]
    markup = node._repr_html_()
    assert markup.startswith("<div class=\"highlight\"") and "style=\"color:" in markup
    assert text_of(markup).rstrip("\n") == node.script().rstrip("\n")   # every character, only coloured


def test_a_profile_displays_as_a_table_with_bars():
    report = ProfileReport("main", {"matmul": (2, 0.003), "add": (1, 0.001)}, 0.005, "cpu:0")
    markup = report._repr_html_()
    assert markup.count("<tr>") == 1 + 4              # the header, two kernels, the VM's time, the total
    widths = [float(w) for w in re.findall(r"width:([\d.]+)px", markup)]
    assert widths == pytest.approx([0.6 * 120, 0.2 * 120, 0.2 * 120])   # matmul, add, the VM
    assert "profile of &#x27;main&#x27; on cpu:0" in markup and "total: main" in markup


def test_the_tour_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    stored = json.loads(TOUR.read_text())
    assert all(not c.get("outputs") for c in stored["cells"] if c["cell_type"] == "code"), "outputs are not stored"
    nb = nbformat.read(TOUR, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(TOUR.parent)}}).execute()
    outputs = [c.outputs for c in nb.cells if c.cell_type == "code"]
    module_display = outputs[0][0]["data"]
    assert "text/html" in module_display and "@I.ir_module" in text_of(module_display["text/html"])
    shown = outputs[1][0]
    assert "fused_matmul_add_relu" in text_of(shown["data"].get("text/html", "")) + str(shown.get("text", ""))
    profile = outputs[3][0]["data"]["text/html"]
    assert "profile of &#x27;main&#x27; on cpu:0" in profile and "width:" in profile
    if shutil.which("dot"):                       # the dataflow picture, inline
        svg = outputs[4][0]["data"]["image/svg+xml"]
        assert "fused_matmul_add_relu" in svg and svg.count("class=\"cluster\"") == 2
