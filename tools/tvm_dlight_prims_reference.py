"""Golden files for the primitives DLight needs beyond the core families — transform_block_layout,
add_unit_loop, reindex, pad_einsum, a one-loop fuse — and for DLight's normalize_prim_func,
made with real Apache TVM 0.27.

A developer tool only (TVM is never imported by tvms or its tests). Run from the repository root
with TVM's venv (see tools/tvm_oracle.py)::

    /work/tvmref/bin/python tools/tvm_dlight_prims_reference.py [--list] [name-prefix ...]

``tools/tvm_oracle.py`` writes tests/golden/dlight_prims/<name>.input.tvms, <name>.steps.py and
either <name>.tvms (TVM's ``sch.mod.script()`` after the steps, no trace) or <name>.error.txt
(the exception class, then only the text after TVM's "Error message:"). The steps use only
``sch`` (``get_sblock``, which tvms's Schedule has too) and, for normalize cases,
``normalize_prim_func(sch)``, which the test binds to tvms's.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import tvm_oracle as oracle  # noqa: E402


def _step_globals() -> dict:
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    # TVM's function takes the schedule itself, not the proxy the steps see as ``sch``.
    return {"normalize_prim_func": lambda sch: normalize_prim_func(sch._sch)}


CASES = oracle.Cases(oracle.Layout(oracle.GOLDEN / "dlight_prims", trace=False, short_errors=True,
                                   script_newline=False, full_versions=False), step_globals=_step_globals)
case, error_case = CASES.add, CASES.error

MATMUL = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((100, 200), "float32"), W: T.Buffer((200, 320), "float32"), C: T.Buffer((100, 320), "float32")):
    for i, j, k in T.grid(100, 320, 200):
        with T.sblock("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W[vk, vj]
'''

UNIT_ITERS = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((1, 16, 1, 8), "float32"), B: T.Buffer((1,), "float32"), C: T.Buffer((1, 16), "float32")):
    for i, j, k, l in T.grid(1, 16, 1, 8):
        with T.sblock("B"):
            vi, vj, vk, vl = T.axis.remap("SRSR", [i, j, k, l])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vj, vk, vl]
    for i, j in T.grid(1, 16):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi] + T.float32(1)
'''

FULL_REDUCE = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((), "float32")):
    for j, l in T.grid(16, 8):
        with T.sblock("B"):
            vj, vl = T.axis.remap("RR", [j, l])
            with T.init():
                B[()] = T.float32(0)
            B[()] = B[()] + A[vj, vl]
'''

SWAPPED = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 16), "float32")):
    for j, l in T.grid(16, 8):
        with T.sblock("B"):
            vl, vj = T.axis.remap("SS", [l, j])
            B[vl, vj] = A[vj, vl]
'''

SHARED_LOOP = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for i in range(4):
        for j in range(8):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for j in range(8):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]
'''

FUSE3 = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 8, 2), "float32"), B: T.Buffer((4, 8, 2), "float32")):
    for i, j, k in T.grid(4, 8, 2):
        with T.sblock("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
'''

UNIT_LOOP = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((1, 16), "float32"), B: T.Buffer((1, 16), "float32")):
    for i, j in T.grid(1, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
'''

for name, source, steps in [
    # transform_block_layout
    ("tbl_fuse_spatial", FUSE3, 'sch.transform_block_layout(sch.get_sblock("B"), lambda i, j, k: (i * 8 + j, k))'),
    ("tbl_add_unit", FUSE3, 'sch.transform_block_layout(sch.get_sblock("B"), lambda i, j, k: (i * 0, i, j * 2 + k))'),
    ("tbl_drop_unit", UNIT_ITERS, 'sch.transform_block_layout(sch.get_sblock("C"), lambda i, j: (j,))'),
    ("tbl_matmul_canonical", MATMUL, 'sch.transform_block_layout(sch.get_sblock("mm"), lambda i, j, k: (i * 0, i, j, k))'),
    ("err_tbl_mixed_kinds", MATMUL, 'sch.transform_block_layout(sch.get_sblock("mm"), lambda i, j, k: (i, j * 200 + k))'),
    ("err_tbl_shared_loop", SHARED_LOOP, 'sch.transform_block_layout(sch.get_sblock("B"), lambda i, j: (j, i))'),
    ("err_tbl_not_trivial", SWAPPED, 'sch.transform_block_layout(sch.get_sblock("B"), lambda i, j: (i, j))'),
    # add_unit_loop
    ("add_unit_loop_block", FUSE3, 'sch.add_unit_loop(sch.get_sblock("B"))'),
    ("add_unit_loop_loop", FUSE3, 'sch.add_unit_loop(sch.get_loops(sch.get_sblock("B"))[1])'),
    # a one-loop fuse renames; a unit loop's variable becomes 0
    ("fuse_one_loop", FUSE3, 'sch.fuse(sch.get_loops(sch.get_sblock("B"))[1])'),
    ("fuse_one_unit_loop", UNIT_LOOP, 'sch.fuse(sch.get_loops(sch.get_sblock("B"))[0])'),
    # reindex
    ("reindex_read_write", MATMUL,
     'b = sch.get_sblock("mm")\nsch.reindex(b, ("write", 0))\nsch.reindex(b, ("read", 0))\nsch.reindex(b, ("read", 1))'),
    ("err_reindex_out_of_range", MATMUL, 'sch.reindex(sch.get_sblock("mm"), ("read", 2))'),
    # pad_einsum
    ("pad_einsum_partial", MATMUL, 'sch.pad_einsum(sch.get_sblock("mm"), [32, 64, 8])'),
    ("pad_einsum_all", MATMUL, 'sch.pad_einsum(sch.get_sblock("mm"), [32, 64, 16])'),
    ("pad_einsum_divisible", MATMUL, 'sch.pad_einsum(sch.get_sblock("mm"), [4, 64, 8])'),
    # DLight's normalize_prim_func
    ("normalize_unit_iters", UNIT_ITERS, "normalize_prim_func(sch)"),
    ("normalize_full_reduce", FULL_REDUCE, "normalize_prim_func(sch)"),
    ("normalize_shared_loop", SHARED_LOOP, "normalize_prim_func(sch)"),
    ("normalize_swapped", SWAPPED, "normalize_prim_func(sch)"),
]:
    (error_case if name.startswith("err_") else case)(name, source, steps)


if __name__ == "__main__":
    sys.exit(oracle.main(sys.argv[1:], CASES))
