"""The XOR swizzle of shared tiles (`compiler.lower_gpu.permuted_layout`, TVM's
``permuted_layout``): a permutation of each row's 16-byte chunks under which the 8 rows an
``ldmatrix`` reads, and the 8 chunks of any 128 bytes a copy writes, fall in 8 different
groups of banks. The mma.sync schedule's counters (no conflicts, no padding) are in
test_cuda_mma.py."""

from __future__ import annotations

import re

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.lower_gpu.permuted_layout import _permuted
from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.tir_arith import const_int
from support.cuda_check import matmul_src, prim_funcs_of

CHUNK = 16
BANK_GROUPS = 8      # 16-byte groups of the 32 four-byte banks


def _placement(buf: tir.Buffer) -> dict:
    """(row, element) -> element offset in the buffer, through the swizzle."""
    rows, width = (const_int(d) for d in buf.shape[-2:])
    out = {}
    for r in range(rows):
        for c in range(width):
            new = _permuted(buf, [tir.IntImm("int32", r), tir.IntImm("int32", c)])
            out[r, c] = r * width + const_int(simplify(new[-1]))
    return out


@pytest.mark.parametrize("width, dtype", [(32, "float16"), (64, "float16"), (128, "float16"), (256, "float16"),
                                          (16, "float16"), (32, "float32"), (8, "float32")])
def test_swizzle_is_a_permutation_of_whole_chunks_and_spreads_8_rows_over_the_banks(width, dtype):
    size = 2 if dtype == "float16" else 4
    per_chunk = CHUNK // size
    buf = tir.Buffer("S", [tir.IntImm("int32", 16), tir.IntImm("int32", width)], dtype, scope="shared")
    place = _placement(buf)
    rows = 16
    # A permutation within each row, moving 16-byte chunks whole.
    for r in range(rows):
        got = sorted(place[r, c] for c in range(width))
        assert got == list(range(r * width, (r + 1) * width))
        for c in range(0, width, per_chunk):
            run = [place[r, c + e] for e in range(per_chunk)]
            assert run == list(range(run[0], run[0] + per_chunk)) and run[0] % per_chunk == 0
    chunks = width * size // CHUNK
    # ldmatrix: the same chunk of 8 consecutive rows (8 aligned rows) hits 8 bank groups.
    for r0 in range(0, rows, 8):
        for c in range(0, width, per_chunk):
            groups = {(place[r0 + q, c] * size // CHUNK) % BANK_GROUPS for q in range(8)}
            assert len(groups) == min(8, BANK_GROUPS), (r0, c, groups)
    # A copy writing 128 consecutive bytes of the logical tile fills 8 bank groups.
    if chunks >= 2:
        flat = [(r, c) for r in range(rows) for c in range(0, width, per_chunk)]
        for start in range(0, len(flat), 8):
            groups = {(place[rc] * size // CHUNK) % BANK_GROUPS for rc in flat[start:start + 8]}
            assert len(groups) == 8


@pytest.mark.parametrize("shape, strides", [([16, 24], []),          # 3 chunks a row: not a power of two
                                            ([16, 4], []),           # rows of half a chunk
                                            ([16, 32], [40, 1])])    # padded rows (storage_align)
def test_tiles_that_cannot_be_swizzled_keep_their_layout(shape, strides):
    buf = tir.Buffer("S", [tir.IntImm("int32", d) for d in shape], "float16", scope="shared",
                     strides=[tir.IntImm("int32", s) for s in strides])
    assert _permuted(buf, [tir.IntImm("int32", 1), tir.IntImm("int32", 3)]) is None


def test_the_mma_schedule_swizzles_its_tiles_instead_of_padding_them():
    """Four stages of a 128x32 tile of A and a 32x128 tile of B, unpadded: 64 KiB; every
    ldmatrix and cp.async address goes through the XOR."""
    code = build_cuda(prim_funcs_of(tvms.parse(matmul_src(2048, 2048, 2048))), "cuda -arch=sm_90", kind="source")
    src = code.source
    assert "tvms_dynamic_smem" in src
    assert code.functions["mm"].launches[0].dyn_shared_bytes == str(4 * (128 * 32 + 32 * 128) * 2)
    calls = re.findall(r"tvms_(?:ldmatrix_x4(?:_trans)?|cp_async16)\((.*)\);", src)
    assert len(calls) >= 4 and all(" ^ " in c for c in calls), calls
