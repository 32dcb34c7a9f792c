"""`compiler.schedule_cpu` carried out with schedule primitives: names, duplicate block names."""

import numpy as np

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule.common import blocks_under
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.runtime.cpu import build_cpu

TWO_NESTS_ONE_NAME = '''
@T.prim_func
def f(A: T.Buffer((64, 512), "float32"), B: T.Buffer((512, 256), "float32"), C: T.Buffer((64, 256), "float32"),
      D: T.Buffer((64, 256), "float32")):
    for i, j, k in T.grid(64, 256, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j, k in T.grid(64, 256, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = T.float32(0)
            D[vi, vj] = T.max(D[vi, vj], A[vi, vk] * B[vk, vj])
'''


def _blocks(stmt) -> list:
    """The names of ``stmt`` (when a block) and of every block below it, in program order."""
    realizes = ([stmt] if isinstance(stmt, tir.BlockRealize) else []) + blocks_under(stmt)
    return [r.block.name for r in realizes]


def test_nests_sharing_a_block_name_are_both_scheduled_bitwise():
    g = default_schedule(tvms.parse(TWO_NESTS_ONE_NAME))
    names = _blocks(g.body)
    assert {"C_init", "C_update", "C_pack", "C_1_init", "C_1_update", "C_1_pack"} <= set(names)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 512)).astype("float32")
    b = rng.standard_normal((512, 256)).astype("float32")
    outs = []
    for schedule in (True, False):
        c, d = np.zeros((64, 256), "float32"), np.zeros((64, 256), "float32")
        build_cpu({"f": tvms.parse(TWO_NESTS_ONE_NAME)}, schedule=schedule)["f"](a, b, c, d)
        outs.append((c, d))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_allclose(outs[0][0], a @ b, rtol=1e-4, atol=1e-3)


def test_transposing_copy_is_block_tiled_with_split_names():
    src = '''
@T.prim_func
def f(A: T.Buffer((512, 384), "float32"), B: T.Buffer((384, 512), "float32")):
    for i, j in T.grid(384, 512):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi]
'''
    g = default_schedule(tvms.parse(src))
    top = g.body.block.body if isinstance(g.body, tir.BlockRealize) else g.body
    names = []
    while isinstance(top, tir.For):
        names.append((top.loop_var.name, top.kind))
        top = top.body
    assert names == [("i_0", "parallel"), ("j_0", "serial"), ("i_1", "serial"), ("j_1", "serial")]
    a = np.random.default_rng(1).standard_normal((512, 384)).astype("float32")
    b = np.zeros((384, 512), "float32")
    build_cpu({"f": tvms.parse(src)}, schedule=True)["f"](a, b)
    np.testing.assert_array_equal(b, a.T)
