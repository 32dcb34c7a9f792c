"""FuseOps fuses through diamonds (issue 27): a value used twice joins its immediate
post-dominator's group when every path there is fusable, as TVM's graph partitioner does,
and stops where TVM stops (a reduction or an opaque call on a path, a value seen outside
the dataflow block)."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import re
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform._common import (kBroadcast, kCommReduce, kElemWise, kInjective, kOpaque,
                                                  kOutEWiseFusable)
from tvmscript.compiler.transform.fusion_partition import (MAX_FUSED_OPS, FusionGraph, partition,
                                                           post_dominator_tree)

HEADER = "# from tvm.script import ir as I\n# from tvm.script import relax as R\n\n"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def fuse_ops(text: str):
    mod = tvms.parse(HEADER + text)
    for p in (relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FuseOps()):
        mod = p(mod)
    return mod


def groups(mod) -> list:
    """What main calls, in order: the fused functions, and the PrimFuncs of calls left alone."""
    calls = re.findall(r"= (?:cls\.)?(fused_\w+)\(|R\.call_tir\((?:cls\.)?(\w+)", mod["main"].script())
    return [fused or alone for fused, alone in calls]


def module(dataflow: str, output: str = "y", tail: str = "", ret: str = "y") -> str:
    body = "\n".join("            " + line for line in dataflow.strip().splitlines())
    tail = "".join("        " + line + "\n" for line in tail.strip().splitlines())
    return f'''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 16), "float32"), b: R.Tensor((16,), "float32")):
        with R.dataflow():
{body}
            R.output({output})
{tail}        return {ret}
'''


# GELU as the ONNX importer writes it: the biased matmul's result h is used twice.
GELU = '''
mm = R.matmul(x, w)
h = R.add(mm, b)
d = R.divide(h, R.const(1.4142135, "float32"))
e = R.erf(d)
one = R.add(e, R.const(1.0, "float32"))
m = R.multiply(h, one)
y = R.multiply(m, R.const(0.5, "float32"))
'''


def gelu_reference(x, w, b):
    h = x @ w + b
    return h * (np.vectorize(math.erf)(h / np.float32(1.4142135)) + 1) * 0.5


def test_an_elementwise_diamond_after_a_matmul_is_one_group():
    mod = fuse_ops(module('''
mm = R.matmul(x, w)
h = R.add(mm, b)
left = R.exp(h)
right = R.nn.relu(h)
y = R.multiply(left, right)
'''))
    assert groups(mod) == ["fused_matmul_add_tir_exp_relu_multiply"]


def test_the_gelu_chain_is_one_kernel_and_computes_gelu():
    mod = fuse_ops(module(GELU))
    assert groups(mod) == ["fused_matmul_add_divide_erf_add1_multiply_multiply1"]
    mod = relax.transform.FuseTIR()(mod)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((4, 8), (8, 16), (16,)))
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    got = vm["main"](tvms.nd.array(x), tvms.nd.array(w), tvms.nd.array(b)).numpy()
    np.testing.assert_allclose(got, gelu_reference(x, w, b), rtol=1e-5, atol=1e-5)


def test_a_reduction_on_a_branch_stops_the_diamond():
    """softmax's shape: exp's result (fused with the matmul, its one consumer) feeds a sum and
    the divide by it. The sum sits on a path from exp to the divide: neither a matmul's group
    nor an elementwise op fuses past a reduction."""
    mod = fuse_ops(module('''
h = R.matmul(x, w)
e = R.exp(h)
s = R.sum(e, axis=[1], keepdims=True)
y = R.divide(e, s)
'''))
    assert groups(mod) == ["fused_matmul_tir_exp", "sum", "divide"]


def test_an_opaque_call_on_a_branch_stops_the_diamond():
    mod = fuse_ops(module('''
mm = R.matmul(x, w)
h = R.add(mm, b)
s = R.call_dps_packed("my_func", (h,), out_sinfo=R.Tensor((4, 16), "float32"))
left = R.exp(h)
y = R.multiply(left, s)
'''))
    assert groups(mod) == ["fused_matmul_add", "fused_tir_exp_multiply"]


def test_a_value_returned_from_the_block_is_not_fused_past():
    mod = fuse_ops(module(GELU, output="h, y", ret="(h, y)"))
    assert groups(mod) == ["fused_matmul_add", "fused_divide_erf_add1_multiply_multiply1"]


def test_a_value_used_after_the_block_is_not_fused_past():
    mod = fuse_ops(module(GELU, output="h, y", tail="z = R.add(h, y)", ret="z"))
    assert groups(mod) == ["fused_matmul_add", "fused_divide_erf_add1_multiply_multiply1", "add2"]


def test_the_post_dominator_of_a_diamond_is_where_its_paths_meet():
    """0 -> 1 -> 3, 0 -> 2 -> 3: node 0's immediate post-dominator is 3, and the pattern on
    the way is the largest of the edges climbed (the broadcast into 2)."""
    ew = kElemWise
    graph = FusionGraph([kOutEWiseFusable, ew, ew, ew],
                        [[(1, ew), (2, kBroadcast)], [(3, ew)], [(3, ew)], []], [False] * 4)
    tree = post_dominator_tree(graph)
    assert tree.parent == [3, 3, 3, None]
    assert tree.pattern[0] == kBroadcast
    # a matmul fuses only through an elementwise way: here it stays alone, the rest is one group
    assert partition(graph) == [0, 3, 3, 3]


def test_a_branch_that_ends_inside_the_block_has_no_post_dominator():
    """Node 2's value is never used (nor returned): the paths from 0 never meet again."""
    ew = kElemWise
    graph = FusionGraph([ew, ew, ew, ew], [[(1, ew), (2, ew)], [(3, ew)], [], []], [False, False, False, True])
    assert post_dominator_tree(graph).parent[0] is None
    assert partition(graph) == [0, 3, 2, 3]


def test_injective_ops_fuse_through_a_diamond_in_the_second_phase():
    """Phase 0 fuses the elementwise node 2 into its injective post-dominator 3; phase 1 then
    fuses the injective node 0 with everything on its paths to 3, all injective."""
    ew, inj = kElemWise, kInjective
    graph = FusionGraph([inj, inj, ew, inj], [[(1, inj), (2, ew)], [(3, inj)], [(3, inj)], []],
                        [False, False, False, True])
    assert partition(graph) == [3, 3, 3, 3]


def test_injective_ops_do_not_fuse_into_a_reduction():
    """The same diamond ending in a reduction: the elementwise node 1 fuses into it, the
    injective nodes 0 and 2 do not (an injective group fuses only into injective ones)."""
    ew, inj, red = kElemWise, kInjective, kCommReduce
    graph = FusionGraph([inj, ew, inj, red, kOpaque],
                        [[(1, ew), (2, inj)], [(3, red)], [(3, red)], [(4, kOpaque)], []],
                        [False] * 4 + [True])
    assert partition(graph) == [0, 3, 2, 3, 4]


def _gpt_dynamic_onnx():
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    spec = importlib.util.spec_from_file_location("benchmark_models", ROOT / "benchmarks" / "_models.py")
    models = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
    spec.loader.exec_module(models)
    case = next(c for c in models.CASES if c.name == "gpt_dynamic")
    model, example = case.make()
    return models.onnx_model(case, model, example)


def test_the_onnx_gpt_has_no_kernel_of_its_own_for_gelu():
    from tvmscript.relax.frontend.onnx import from_onnx

    mod = from_onnx(_gpt_dynamic_onnx())
    mod = tvms.relax.transform.bound_inference_passes("main")(mod)
    mod = tvms.relax.get_pipeline("zero")(mod)
    kernels = re.findall(r"call_tir\((?:cls\.)?(\w+)", mod["main"].script())
    erf = [k for k in kernels if "erf" in k]
    assert len(erf) == 2 and all(k.startswith("fused_matmul") for k in erf), kernels


def test_a_group_holds_at_most_max_fused_ops_nodes():
    """A chain of 300 elementwise ops: the first 256 (TVM's relax.FuseOps.max_depth) are one
    group, the rest another."""
    n = 300
    graph = FusionGraph([kElemWise] * n, [[(i + 1, kElemWise)] for i in range(n - 1)] + [[]],
                        [False] * (n - 1) + [True])
    assert MAX_FUSED_OPS == 256
    assert partition(graph) == [255] * 256 + [n - 1] * (n - 256)
