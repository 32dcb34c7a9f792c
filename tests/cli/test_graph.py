"""Pictures of Relax dataflow (tvmscript/relax/dataflow_graph.py): the DOT text checked node by
node and edge by edge, the SVG Graphviz draws parsed, and ``tvms show --graph`` through the
real entry point."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.cli import TVMS, tvms

import tvmscript as tvms_api
from tvmscript import relax

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "samples" / "mlp.tvms"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def parse_dot(text: str):
    """(labels by node, edges, cluster labels, nodes by cluster) of the DOT text `to_dot` writes."""
    labels = dict(re.findall(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"', text, re.M))
    edges = re.findall(r"^\s*(n\d+) -> (n\d+);", text, re.M)
    clusters = re.findall(r'subgraph cluster_\d+ \{\n\s*label="([^"]+)"', text)
    members, current = {}, None
    for line in text.splitlines():
        m = re.match(r'\s*subgraph cluster_\d+ \{', line)
        if m:
            current = []
        elif current is not None and re.match(r"\s*label=", line):
            members[re.search(r'label="([^"]+)"', line).group(1)] = current
        elif current is not None and line.strip() == "}":
            current = None
        elif current is not None:
            node = re.match(r"\s*(n\d+) \[", line)
            if node:
                current.append(node.group(1))
    return {k: v.replace("\\n", "\n") for k, v in labels.items()}, edges, clusters, members


def fused_mlp():
    t = relax.transform
    return t.FuseOps()(t.AnnotateTIROpPattern()(t.LegalizeOps()(tvms_api.load(MLP))))


def test_a_node_per_parameter_and_binding_an_edge_per_read():
    labels, edges, clusters, _ = parse_dot(relax.visualize(tvms_api.load(MLP)).dot)
    names = {label.split("\n")[0]: node for node, label in labels.items()}
    assert len(labels) == 5 + 8 + 1                         # parameters, bindings, the result
    assert labels[names["matmul = R.matmul"]] == "matmul = R.matmul\n(1, 256) float32"
    assert labels[names["fc1_bias"]] == "fc1_bias\n(256,) float32"
    by_label = {v.split("\n")[0]: k for k, v in labels.items()}
    assert (by_label["x"], by_label["matmul = R.matmul"]) in edges
    assert (by_label["permute_dims = R.permute_dims"], by_label["matmul = R.matmul"]) in edges
    assert (by_label["gv = add1"], by_label["return"]) in edges
    assert len(edges) == 13 and clusters == []


def test_fused_functions_are_clusters_and_kernels_are_named():
    labels, edges, clusters, members = parse_dot(relax.visualize(fused_mlp()).dot)
    assert sorted(clusters) == ["fused_matmul1_add1", "fused_matmul_add_relu"]
    inside = [labels[n].split("\n")[0] for n in members["fused_matmul_add_relu"]]
    assert inside == ["matmul = R.call_tir: matmul", "add = R.call_tir: add", "gv = R.call_tir: relu", "lv"]
    by_label = {v.split("\n")[0]: k for k, v in labels.items()}
    assert (by_label["x"], by_label["matmul = R.call_tir: matmul"]) in edges    # arguments feed the cluster
    assert (by_label["permute_dims = R.call_tir: transpose"], by_label["matmul = R.call_tir: matmul"]) in edges
    assert (by_label["lv"], by_label["matmul1 = R.call_tir: matmul1"]) in edges  # its result leaves it


@needs_dot
def test_the_svg_draws_every_node():
    labels, _, _, _ = parse_dot(relax.visualize(fused_mlp()).dot)
    svg = ET.fromstring(relax.visualize(fused_mlp()).render("svg"))
    ns = {"svg": "http://www.w3.org/2000/svg"}
    nodes = svg.findall(".//svg:g[@class='node']", ns)
    assert len(nodes) == len(labels)
    assert len(svg.findall(".//svg:g[@class='cluster']", ns)) == 2


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
@pytest.mark.parametrize("ext", ["dot", pytest.param("svg", marks=needs_dot), pytest.param("png", marks=needs_dot)])
def test_tvms_show_graph_writes_the_picture(tmp_path, ext):
    out = tmp_path / f"mlp.{ext}"
    proc = tvms("show", MLP, "--pipeline", "zero", "--graph", out)
    assert proc.returncode == 0, proc.err
    data = out.read_bytes()
    if ext == "dot":
        labels, _, _, _ = parse_dot(data.decode())
        assert any("R.call_tir: fused_matmul_add_relu" in v for v in labels.values())
    elif ext == "svg":
        assert ET.fromstring(data).tag.endswith("svg")
    else:
        assert data.startswith(b"\x89PNG")


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_tvms_show_graph_errors(tmp_path):
    proc = tvms("show", MLP, "--graph", tmp_path / "mlp.jpg")
    assert proc.returncode == 1 and "must end in one of .dot, .svg, .png, .pdf" in proc.err
    proc = tvms("show", MLP, "--func", "nope", "--graph", tmp_path / "mlp.dot")
    assert proc.returncode == 1 and "no Relax function 'nope'" in proc.err
    assert not list(tmp_path.iterdir())                     # nothing written
