"""Generate reference TVMScript printouts from real Apache TVM.

Purpose
-------
This script is a *developer tool* only.  It parses a set of small TVMScript
programs (written inline below) with the real Apache TVM package and writes
what TVM's printer (``obj.script()``) produces for each of them, one ``.txt``
file per probe, so that the output of tvms's own printer can be compared
against the reference.  TVM is never a dependency of tvms: nothing in tvms
imports this file, and it is only run by hand in a separate virtualenv.

Setup (outside the repo)::

    python3 -m venv /work/tvmref
    /work/tvmref/bin/pip install apache-tvm==0.27.0 numpy
    # apache-tvm-ffi 0.1.15.x makes script(show_meta=True) segfault in
    # tvm::ffi::ToJSONGraph with apache-tvm 0.27.0; 0.1.14.post1 works:
    /work/tvmref/bin/pip install apache-tvm-ffi==0.1.14.post1

Run::

    /work/tvmref/bin/python tools/tvm_reference.py [OUT_DIR]   # default /tmp/tvm_ref
    /work/tvmref/bin/python tools/tvm_reference.py OUT_DIR a_matmul c_exprs  # only some

Each probe is written to ``OUT_DIR/<name>.txt``.  Checked-in copies:
``tools/tvm_reference_out/`` (apache-tvm 0.27.0) and ``tools/tvm_reference_out_0.25/``
(apache-tvm 0.25.0, which needs ``pip install apache-tvm-ffi==0.1.12`` to import;
0.25 still prints the Relax side the classic way: ``R.Tensor(("n", 4))`` with
``n = T.int64()`` in the body, ``out_sinfo=``, ``R.Object``, ``R.Prim("int64")``,
``metadata["relax.expr.Constant"]``).  A probe that fails writes
``ERROR: ...`` with TVM's message instead (those failures are facts too, e.g.
the classic spellings that TVM 0.27 rejects, see the ``g_*`` probes).

Dialect notes for TVM 0.25-0.27 (the versions on PyPI): TIR is the ``tirx``
dialect (``from tvm.script import tirx as T``); ``T.block`` is gone
(``T.sblock``), and a prim_func that contains sblocks must be declared
``@T.prim_func(s_tir=True)``; in 0.26/0.27 Relax ``StructInfo`` became
``Type`` (``out_sinfo=`` -> ``out_ty=``, ``sinfo_args=`` -> ``ty_args=``) and
``R.call_tir`` lost ``tir_vars=``.
"""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np
import tvm
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

EXTRA_VARS = {"T": T, "I": I, "R": R, "np": np, "tvm": tvm}

PROBES: dict[str, callable] = {}


def probe(name):
    def deco(fn):
        PROBES[name] = fn
        return fn

    return deco


# TVM 0.25 still spells the Relax keywords the classic way; let the probes run there too
# (0.25.0 needs `pip install apache-tvm-ffi==0.1.12` to import at all).
_TVM_VERSION = tuple(int(x) for x in tvm.__version__.split(".")[:2])


def _compat(src: str) -> str:
    if _TVM_VERSION < (0, 26):
        src = src.replace("out_ty=", "out_sinfo=").replace("ty_args=", "sinfo_args=")
    return src


def parse(src: str, check_well_formed: bool = True):
    src = _compat(src)
    try:
        return tvm.script.from_source(src, extra_vars=dict(EXTRA_VARS), check_well_formed=check_well_formed)
    except tvm.error.DiagnosticError as e:
        if "not well-formed" not in str(e) or "Traceback:" in str(e):
            raise
        # TVM's message does not say why; ask the relax checker for the reason
        mod = tvm.script.from_source(src, extra_vars=dict(EXTRA_VARS), check_well_formed=False)
        try:
            tvm.relax.analysis.well_formed(mod)
        except Exception as why:  # pylint: disable=broad-except
            raise RuntimeError(f"not well-formed: {why}") from None
        raise


def script_of(src: str, check_well_formed: bool = True, **kw) -> str:
    return parse(src, check_well_formed).script(**kw)


def sections(*pairs) -> str:
    """Join several (label, thunk) results into one text with '#### label' separators."""
    out = []
    for label, thunk in pairs:
        out.append(f"#### {label}")
        try:
            out.append(str(thunk()))
        except Exception as e:  # pylint: disable=broad-except
            out.append("ERROR: " + _err(e))
    return "\n".join(out) + "\n"


def _err(e: BaseException) -> str:
    msg = str(e).strip()
    # keep the informative part of TVM diagnostics short
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    return f"{type(e).__name__}: " + "\n".join(lines[:25])


def isolated(thunk) -> str:
    """Run thunk in a forked child so that a segfault in TVM does not kill the run."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            text = str(thunk())
        except BaseException as e:  # pylint: disable=broad-except
            text = "ERROR: " + _err(e)
        with os.fdopen(w, "w") as f:
            f.write(text)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        text += f"\nERROR: child process died (wait status {status}); TVM crashed"
    return text


# ---------------------------------------------------------------------------
# (a) basic prim_func with sblocks
# ---------------------------------------------------------------------------

A_MATMUL = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32"), D: T.Buffer((10,), "float32")):
    T.func_attr({"tir.noalias": True})
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
    for i0 in T.serial(10):
        with T.sblock("D"):
            v0 = T.axis.spatial(10, i0)
            D[v0] = T.float32(1)
'''


@probe("a_matmul")
def _a_matmul():
    return script_of(A_MATMUL)


@probe("a_int64_shapes")
def _a_int64():
    return script_of('''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((T.int64(4), T.int64(8)), "float16"), B: T.Buffer((T.int64(4), 8), "float32"), C: T.Buffer((T.int64(4),), "int64")):
    for i, j in T.grid(T.int64(4), T.int64(8)):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.Cast("float32", A[vi, vj])
    for i in range(T.int64(4)):
        with T.sblock("C"):
            vi = T.axis.spatial(T.int64(4), i)
            C[vi] = vi + T.int64(1)
''')


@probe("a_explicit_reads_writes_root")
def _a_explicit():
    # explicit root block, explicit reads/writes, explicit T.axis.reduce
    return script_of('''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    with T.sblock("root"):
        T.reads()
        T.writes()
        for i, k in T.grid(16, 16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                vk = T.axis.reduce(16, k)
                T.reads(A[vi, 0:16])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
''')


@probe("a_func_attrs")
def _a_func_attrs():
    return sections(
        ("func_attr with global_symbol equal to name + extra attrs", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "target": "llvm"})
    A[0] = T.float32(0)
''', check_well_formed=False)),
        ("func_attr with different global_symbol", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "other", "my_attr": 3})
    A[0] = T.float32(0)
''')),
        ("no attrs at all", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = T.float32(0)
''')),
        ("private prim_func alone", lambda: script_of('''
@T.prim_func(private=True)
def main(A: T.Buffer((4,), "float32")):
    A[0] = T.float32(0)
''')),
        ("attrs dict of parsed public prim_func", lambda: str(parse('''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = T.float32(0)
''').attrs)),
    )


@probe("a_te_create_prim_func")
def _a_te():
    from tvm import te

    n = 64
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: te.max(C[i, j], tvm.tirx.const(0, "float32")), name="D")
    f = te.create_prim_func([A, B, D])
    return f.script()


# ---------------------------------------------------------------------------
# (b) loops
# ---------------------------------------------------------------------------


@probe("b_loops")
def _b_loops():
    return script_of('''
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in T.parallel(128):
        A[i] = T.float32(0)
    for i in T.vectorized(128):
        A[i] = T.float32(0)
    for i in T.unroll(128):
        A[i] = T.float32(0)
    for i in T.thread_binding(0, 128, thread="threadIdx.x"):
        A[i] = T.float32(0)
    for i in T.thread_binding(128, thread="blockIdx.x"):
        A[i] = T.float32(0)
    for i in range(10):
        A[i] = T.float32(0)
    for i in T.serial(10):
        A[i] = T.float32(0)
    for i in T.serial(2, 10):
        A[i] = T.float32(0)
    for i in range(2, 10):
        A[i] = T.float32(0)
    for i in T.parallel(2, 10):
        A[i] = T.float32(0)
    for i in T.grid(10):
        A[i] = T.float32(0)
    for i, j in T.grid(16, 16):
        B[i, j] = T.float32(0)
    for i in T.serial(10, annotations={"pragma_unroll_explicit": 1}):
        A[i] = T.float32(0)
    for i in range(4):
        for j in range(4):
            B[i, j] = T.float32(0)
    for i in range(4):
        A[i] = T.float32(0)
        for j in range(4):
            B[i, j] = T.float32(0)
''')


# ---------------------------------------------------------------------------
# (c) expressions and literals
# ---------------------------------------------------------------------------


@probe("c_exprs")
def _c_exprs():
    return script_of('''
@T.prim_func
def main(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "int32"), C: T.Buffer((16,), "bool"), x: T.float32, y: T.float32, a: T.int32, b: T.int32, c: T.int32):
    A[0] = T.if_then_else(a > 0, x, T.float32(1))
    A[1] = T.Select(a < b, x, x + T.float32(1))
    A[2] = T.Cast("float32", a)
    A[3] = T.exp(x)
    A[4] = T.max(x, T.float32(2))
    A[5] = x / T.float32(3)
    A[6] = x * (x / T.float32(2))
    A[7] = -x
    A[8] = (x + y) * x
    A[9] = x - (y - x)
    A[10] = T.sqrt(x) + T.log(x) + T.tanh(x) + T.sigmoid(x)
    A[11] = T.min(x, y)
    A[12] = T.fabs(x)
    A[13] = T.Cast("float32", T.Cast("float16", x))
    A[14] = T.if_then_else(a > 0 and b > 0, x, y)
    A[15] = T.pow(x, y)
    A[16] = T.reinterpret("float32", a)
    A[17] = T.exp(-x)
    A[18] = x - -y
    B[0] = T.floordiv(a, b)
    B[1] = T.floormod(a, b)
    B[2] = T.truncdiv(a, b)
    B[3] = T.truncmod(a, b)
    B[4] = a // b
    B[5] = a % b
    B[6] = (a + b) * c
    B[7] = a - (b - c)
    B[8] = a * (b // c)
    B[9] = -a
    B[10] = a + b * c
    B[11] = a * b + c
    B[12] = a - b - c
    B[13] = T.min(a, b)
    B[14] = T.max(a, b)
    B[15] = T.shift_left(a, 2) + T.shift_right(a, 1)
    B[16] = (a & b) + (a | b) + (a ^ b)
    B[17] = ~a
    B[18] = T.abs(a)
    B[19] = (a + 1) // 2 * 2
    B[20] = a * b // c
    B[21] = T.Cast("int32", x)
    B[22] = 5
    B[23] = T.int32(5)
    B[24] = (a - b) - (b - c)
    B[25] = a // (b * c)
    B[26] = a * -2
    B[27] = -(a + b)
    C[0] = a > 0 and b < 1
    C[1] = a >= 0 or b <= 1
    C[2] = not (a == b)
    C[3] = a != b
    C[4] = (a < b) == (b < c)
    C[5] = a > 0 and b > 0 or c > 0
    C[6] = a > 0 and (b > 0 or c > 0)
    C[7] = T.isnan(x)
    C[8] = not (a > 0 and b > 0)
''')


@probe("c_literals")
def _c_literals():
    return script_of('''
@T.prim_func
def main(F32: T.Buffer((16,), "float32"), F16: T.Buffer((4,), "float16"), F64: T.Buffer((4,), "float64"), BF: T.Buffer((2,), "bfloat16"), I8: T.Buffer((2,), "int8"), I16: T.Buffer((2,), "int16"), I64: T.Buffer((4,), "int64"), U8: T.Buffer((2,), "uint8"), U32: T.Buffer((2,), "uint32"), BL: T.Buffer((2,), "bool")):
    F32[0] = T.float32(0)
    F32[1] = T.float32(0.70710678118654757)
    F32[2] = T.float32(1e-5)
    F32[3] = T.float32(1e10)
    F32[4] = T.float32(1.5e-7)
    F32[5] = T.float32(100000)
    F32[6] = T.float32(float("inf"))
    F32[7] = T.float32(-float("inf"))
    F32[8] = T.float32(float("nan"))
    F32[9] = T.float32(-2.5)
    F32[10] = T.float32(0.1)
    F32[11] = T.float32(3.4028234663852886e38)
    F32[12] = T.float32(1e16)
    F32[13] = T.float32(1e17)
    F32[14] = T.float32(123456789)
    F32[15] = T.float32(1.0e-4)
    F16[0] = T.float16(1.5)
    F16[1] = T.float16(0.1)
    F16[2] = T.float16(65504)
    F64[0] = T.float64(0.1)
    F64[1] = T.float64(3.14159)
    F64[2] = T.float64(1)
    BF[0] = T.bfloat16(1.5)
    I8[0] = T.int8(3)
    I8[1] = T.int8(-3)
    I16[0] = T.int16(7)
    I64[0] = T.int64(1)
    I64[1] = T.int64(-1)
    I64[2] = T.int64(2147483648)
    I64[3] = T.int64(0)
    U8[0] = T.uint8(255)
    U32[0] = T.uint32(4294967295)
    BL[0] = T.bool(True)
    BL[1] = T.bool(False)
''')


@probe("c_literal_python_floats")
def _c_literal_python_floats():
    # what python-side float values look like after printing (dtype inference)
    return sections(
        ("x + 1.5 with x float32 / float16 / float64", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((3,), "float32"), B: T.Buffer((3,), "float16"), C: T.Buffer((3,), "float64"), x: T.float32, h: T.float16, d: T.float64):
    A[0] = x + 1.5
    B[0] = h + 1.5
    C[0] = d + 1.5
    A[1] = x * 2
''')),
        ("int64 loop var arithmetic", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((T.int64(8),), "float32")):
    for i in range(T.int64(8)):
        A[i + T.int64(0)] = T.Cast("float32", i * T.int64(2) + T.int64(1))
''')),
    )


# ---------------------------------------------------------------------------
# (d) handles, symbolic vars, block features, if/else, scopes
# ---------------------------------------------------------------------------


@probe("d_handle_match_buffer")
def _d_handle():
    return script_of('''
@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle, d: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 784), "float32")
    B = T.match_buffer(b, (128,), "float32")
    m = T.int32()
    C = T.match_buffer(c, (m,), "float32")
    D = T.match_buffer(d, (m, m), "float16")
    for i, j in T.grid(n, 784):
        A[i, j] = T.float32(0)
    for i in range(m):
        C[i] = T.float32(1)
    for i in range(128):
        B[i] = T.float32(0)
''')


@probe("d_handle_misc")
def _d_handle_misc():
    return sections(
        ("unmatched T.handle param + int scalar param", lambda: script_of('''
@T.prim_func
def main(h: T.handle, n: T.int32, A: T.Buffer((4,), "float32")):
    A[0] = T.Cast("float32", n)
''')),
        ("match_buffer with strides/offset", lambda: script_of('''
@T.prim_func
def main(a: T.handle):
    s0 = T.int32()
    off = T.int32()
    A = T.match_buffer(a, (4, 4), "float32", strides=(s0, 1), elem_offset=off)
    A[0, 0] = T.float32(0)
''')),
        ("int32 symbolic var used only in body", lambda: script_of('''
@T.prim_func
def main(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        A[i] = T.float32(0)
''')),
    )


@probe("d_sblock_features")
def _d_sblock():
    return script_of('''
@T.prim_func(s_tir=True)
def main(a: T.handle, B: T.Buffer((128,), "float32")):
    n = T.int64()
    A = T.match_buffer(a, (n, 784), "float32")
    for i, j in T.grid(n, 784):
        with T.sblock("blk"):
            vi = T.axis.spatial(n, i)
            vj = T.axis.spatial(784, j)
            T.where(i * 784 + j < n * 700)
            T.sblock_attr({"meta_schedule.x": 1})
            S = T.sblock_alloc_buffer((16,), "float32", scope="shared")
            S[0] = A[vi, vj]
            A[vi, vj] = S[0] * T.float32(2)
    for io, ii in T.grid(4, 32):
        with T.sblock("B"):
            v = T.axis.spatial(128, io * 32 + ii)
            T.sblock_attr({"k": "v", "n": 2})
            B[v] = T.float32(0)
''')


@probe("d_if_else_and_index_exprs")
def _d_if_else():
    return script_of('''
@T.prim_func
def main(B: T.Buffer((256,), "float32"), n: T.int32):
    for i in range(128):
        if i < 64:
            B[i] = T.float32(0)
        else:
            B[i] = T.float32(1)
        if i == 3:
            B[i * 2 - 1] = B[i // 2 + 1]
        if i > 5:
            if i < 10:
                B[i] = T.float32(2)
        else:
            B[n + i] = T.float32(3)
    B[n] = T.float32(0)
    B[n * 2 + 1] = B[n]
    for j in range(4):
        if j == 0:
            B[j] = T.float32(0)
        elif j == 1:
            B[j] = T.float32(1)
        else:
            B[j] = T.float32(2)
    x: T.float32 = B[0] + T.float32(1)
    B[1] = x
    T.evaluate(T.call_extern("int32", "my_func", B.data, n))
    assert n > 0, "n must be positive"
    while n > 0:
        B[0] = T.float32(1)
''')


@probe("d_alloc_scopes")
def _d_alloc():
    return sections(
        ("non-sblock prim_func: alloc_buffer with scopes", lambda: script_of('''
@T.prim_func
def main(A: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((16,), "float32", scope="shared")
    L = T.alloc_buffer((16,), "float32", scope="local")
    G = T.alloc_buffer((16,), "float32")
    H = T.alloc_buffer((4, 4), "float16", scope="shared.dyn")
    for i in range(16):
        S[i] = A[i]
        L[i] = S[i]
        G[i] = L[i]
        A[i] = G[i]
''')),
        ("s_tir prim_func: root-level alloc_buffer with scopes", lambda: script_of('''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((16,), "float32", scope="shared")
    L = T.alloc_buffer((16,), "float32", scope="local")
    for i in range(16):
        with T.sblock("x"):
            vi = T.axis.spatial(16, i)
            S[vi] = A[vi]
            L[vi] = S[vi]
            A[vi] = L[vi]
''')),
    )


# ---------------------------------------------------------------------------
# (e) Relax
# ---------------------------------------------------------------------------


@probe("e_relax_param_types")
def _e_types():
    return script_of('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 784), "float32"), y: R.Tensor(ndim=2, dtype="float32"), z: R.Tensor(dtype="float32"), t: R.Tuple(R.Tensor((2,), "float32"), R.Shape([1, 2])), s: R.Shape(ndim=2), s2: R.Shape(["n", 3]), o: R.Object, p: R.Prim("int64"), w: R.Tensor((2, 3), "float32"), u: R.Tensor, v: R.Tensor(("n", "m")), e: R.Tuple) -> R.Tensor(("n", 784), "float32"):
        n = T.int64()
        return x
''')


@probe("e_relax_consts")
def _e_consts():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c0 = R.const(1.0, "float32")
        c1 = R.const(1, "int32")
        c2 = R.const(True, "bool")
        c3 = R.const(np.zeros((3,), "float32"))
        c4 = R.const(np.zeros((20,), "float32"))
        c5 = R.const(2.5, "float16")
        c6 = R.const(np.array(7, "int64"))
        y = R.add(x, c3)
        return y
'''
    return sections(
        ("script()", lambda: script_of(src)),
        ("script(show_meta=True)  [run in a child process: segfaults with apache-tvm-ffi 0.1.15.x]",
         lambda: isolated(lambda: script_of(src, show_meta=True))),
    )


@probe("e_relax_bindings_dataflow")
def _e_bindings():
    return script_of('''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add_one(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            B[i, j] = A[i, j] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 784), "float32"), y: R.Tensor(ndim=2, dtype="float32"), w: R.Tensor((2, 3), "float32")) -> R.Tensor(("n", 784), "float32"):
        n = T.int64()
        tup = (x, w)
        e = tup[0]
        e1 = tup[1]
        m = R.match_cast(y, R.Tensor((4, 5), "float32"))
        k = T.int64()
        m2 = R.match_cast(y, R.Tensor((k, 5), "float32"))
        with R.dataflow():
            a = R.add(x, x)
            b = R.call_tir(Module.add_one, (w,), out_ty=R.Tensor((2, 3), "float32"))
            lv = R.multiply(a, a)
            R.output(a, b)
        k2 = R.add(a, a)
        with R.dataflow():
            d = R.add(k2, a)
            R.output(d)
        return d
''')


@probe("e_relax_no_dataflow_and_if")
def _e_if():
    return script_of('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), cond: R.Tensor((), "bool")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        a = R.add(x, x)
        if cond:
            r = R.add(a, a)
            q = r
        else:
            r2 = R.multiply(a, a)
            q = r2
        return q

    @R.function
    def g(x: R.Tensor((4,), "float32"), c: R.Prim("bool")):
        if c:
            y = R.add(x, x)
            z = (y, y)
        else:
            z = (x, x)
        return z
''')


@probe("e_relax_packed_and_alloc")
def _e_packed():
    return script_of('''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        c = R.call_dps_packed("f", (x,), out_ty=R.Tensor((n, 4), "float32"))
        c2 = R.call_dps_packed("f2", (x, x), out_ty=[R.Tensor((n, 4), "float32"), R.Tensor((4,), "int32")])
        d = R.call_packed("g", x, ty_args=R.Tensor((n, 4), "float32"))
        d2 = R.call_packed("g2", x, R.prim_value(1), ty_args=[R.Tensor((n, 4), "float32"), R.Object])
        d3 = R.call_pure_packed("g3", x, ty_args=R.Tensor((n, 4), "float32"))
        e = R.builtin.alloc_tensor(R.shape([1, 128]), dtype="float32", runtime_device_index=0)
        s = R.shape([1, n])
        pv = R.prim_value(T.int64(3))
        st = R.str("hello")
        dt = R.dtype("float32")
        return e
''')


@probe("e_relax_call_tir")
def _e_call_tir():
    return script_of('''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def two_out(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32"), C: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            B[i, j] = A[i, j]
            C[i, j] = A[i, j]

    @T.prim_func(private=True)
    def with_n(a: T.handle, n: T.int64, b: T.handle):
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            B[i, j] = A[i, j]

    @R.function
    def main(w: R.Tensor((2, 3), "float32"), x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        cls = Module
        k = R.call_tir(cls.two_out, (w,), out_ty=[R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")])
        k0 = k[0]
        v = R.call_tir(cls.with_n, (x, R.prim_value(n)), out_ty=R.Tensor((n, 4), "float32"))
        return (k0, v)
''')


@probe("e_relax_ops")
def _e_ops():
    return script_of('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 1, 3, 4), "float32"), y: R.Tensor((5, 4, 6), "float32"), a: R.Tensor(("n", 1), "float32"), b: R.Tensor((1, "m"), "float32"), c: R.Tensor((3, 4), "float32")):
        n = T.int64()
        m = T.int64()
        z = R.matmul(x, y)
        z2 = R.matmul(x, y, out_dtype="float16")
        s = R.add(a, b)
        p = R.permute_dims(c, axes=[1, 0])
        p2 = R.permute_dims(c)
        r = R.reshape(c, (2, 6))
        su = R.sum(c, axis=[1], keepdims=True)
        cv = R.astype(c, "float16")
        return (z, z2, s, p, p2, r, su, cv)
''')


@probe("e_relax_function_order")
def _e_order():
    return script_of('''
@I.ir_module
class Module:
    @R.function
    def zeta(x: R.Tensor((4,), "float32")):
        return x

    @R.function(private=True)
    def gamma(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        return x

    @T.prim_func
    def mid(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(0)

    @R.function
    def alpha(x: R.Tensor((4,), "float32")):
        cls = Module
        y = R.call_tir(cls.beta, (x,), out_ty=R.Tensor((4,), "float32"))
        z = cls.zeta(y)
        return z

    @T.prim_func(private=True)
    def beta(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        B[0] = A[0]
''')


@probe("e_relax_blockbuilder")
def _e_bb():
    from tvm import relax

    bb = relax.BlockBuilder()
    n = tvm.tirx.Var("n", "int64")
    proxy = R.Tensor((n, 4), "float32")
    x = relax.Var("x", proxy.as_ty() if hasattr(proxy, "as_ty") else proxy.as_struct_info())
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.add(x, x))
            gv = bb.emit_output(relax.op.multiply(lv0, x))
        bb.emit_func_output(gv)
    return bb.get().script()


# ---------------------------------------------------------------------------
# (f) module level
# ---------------------------------------------------------------------------

MIXED = '''
@I.ir_module
class Module:
    I.module_attrs({"system_lib_prefix": "lib_", "n": 3})

    @T.prim_func
    def pub(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(0)

    @T.prim_func(private=True)
    def priv(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(0)

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.add(x, x)
        return y

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x
'''

ONLY_TIR = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(0)
'''

ONLY_RELAX = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x
'''


@probe("f_module_level")
def _f_module():
    mixed = lambda: parse(MIXED)  # noqa: E731
    return sections(
        ("mixed module with I.module_attrs, public/private prim_func and relax func", lambda: mixed().script()),
        ("module with only prim_funcs", lambda: script_of(ONLY_TIR)),
        ("module with only relax", lambda: script_of(ONLY_RELAX)),
        ("print(mod['main'])  (relax function alone)", lambda: str(mixed()["main"])),
        ("mod['main'].script() (relax function alone)", lambda: mixed()["main"].script()),
        ("print(mod['pub'])  (prim_func alone)", lambda: str(mixed()["pub"])),
        ("print(mod['priv'])  (private prim_func alone)", lambda: str(mixed()["priv"])),
        ("print(mod['helper'])  (private relax function alone)", lambda: str(mixed()["helper"])),
        ("print(mod)  (str of IRModule)", lambda: str(mixed())),
        ("mod.get_global_vars()", lambda: str(mixed().get_global_vars())),
        ("[str(gv) for gv in mod.get_global_vars()]", lambda: str([str(gv) for gv in mixed().get_global_vars()])),
        ("repr(mod.get_global_var('main'))", lambda: repr(mixed().get_global_var("main"))),
        ("pub.attrs / priv.attrs", lambda: f"{mixed()['pub'].attrs}\n{mixed()['priv'].attrs}"),
        ("main.attrs / helper.attrs", lambda: f"{mixed()['main'].attrs}\n{mixed()['helper'].attrs}"),
        ("mod.attrs", lambda: str(mixed().attrs)),
        ("standalone @R.function parsed from source", lambda: script_of('''
@R.function
def f(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
    y = R.add(x, x)
    return y
''')),
        ("script(syntax_sugar=False) of the only-TIR module", lambda: parse(ONLY_TIR).script(syntax_sugar=False)),
        ("script(tir_prefix='tir', relax_prefix='rx', ir_prefix='ir') of mixed", lambda: mixed().script(
            tir_prefix="tir", relax_prefix="rx", ir_prefix="ir")),
    )


# ---------------------------------------------------------------------------
# (g) classic spellings: which are still accepted by TVM 0.27
# ---------------------------------------------------------------------------


@probe("g_classic_spellings")
def _g_classic():
    def try_import_tir():
        from tvm.script import tir  # noqa: F401

        return "accepted"

    tir_block = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(0)
'''
    sblock_no_s_tir = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(0)
'''
    alloc_in_sblock = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            S = T.alloc_buffer((4,), "float32")
            S[vi] = T.float32(0)
            A[vi] = S[vi]
'''
    block_attr = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            T.block_attr({"x": 1})
            A[vi] = T.float32(0)
'''
    out_sinfo = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        B[0] = A[0]

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = R.call_tir(Module.f, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y
'''
    tir_vars = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), n: T.int64):
        B[0] = A[0]

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = R.call_tir(Module.f, (x,), out_ty=R.Tensor((4,), "float32"), tir_vars=R.shape([4]))
        return y
'''
    sinfo_args = '''
@R.function(pure=False)
def main(x: R.Tensor((4,), "float32")):
    y = R.call_packed("g", x, sinfo_args=R.Tensor((4,), "float32"))
    return y
'''
    prim_value_kw = '''
@R.function
def main(x: R.Prim(value="n")):
    return x
'''
    alloc_tensor = '''
@R.function(pure=False)
def main(x: R.Tensor((4,), "float32")):
    y = R.alloc_tensor((1, 128), dtype="float32", runtime_device_index=0)
    return y
'''
    tir_prim_func_attr = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "main"})
    A[0] = T.float32(0)
'''
    return sections(
        ("from tvm.script import tir", try_import_tir),
        ("T.block (classic)", lambda: script_of(tir_block)),
        ("T.sblock without s_tir=True", lambda: script_of(sblock_no_s_tir)),
        ("T.sblock without s_tir=True, check_well_formed=False", lambda: script_of(sblock_no_s_tir, check_well_formed=False)),
        ("T.alloc_buffer inside a non-root sblock", lambda: script_of(alloc_in_sblock)),
        ("T.block_attr", lambda: script_of(block_attr)),
        ("R.call_tir(..., out_sinfo=...)", lambda: script_of(out_sinfo)),
        ("R.call_tir(..., tir_vars=...)", lambda: script_of(tir_vars)),
        ("R.call_packed(..., sinfo_args=...)", lambda: script_of(sinfo_args)),
        ("R.Prim(value=...)", lambda: script_of(prim_value_kw)),
        ("R.alloc_tensor(...)", lambda: script_of(alloc_tensor)),
        ("T.func_attr global_symbol", lambda: script_of(tir_prim_func_attr)),
        ("python-side names", lambda: "\n".join(
            f"{mod}.{name}: {hasattr(obj, name)}"
            for mod, obj, names in [
                ("T", T, ["block", "sblock", "block_attr", "sblock_attr", "sblock_alloc_buffer", "alloc_buffer",
                          "match_buffer", "where", "init", "reads", "writes", "axis", "Buffer", "handle",
                          "alloc_shared", "alloc_local", "Select", "if_then_else", "Cast", "Div", "meta_var"]),
                ("R", R, ["Object", "Any", "Tensor", "Shape", "Prim", "Tuple", "Callable", "match_cast",
                          "alloc_tensor", "call_tir", "call_dps_packed", "call_packed", "call_pure_packed",
                          "prim_value", "shape", "str", "dtype", "const", "dataflow", "output", "emit",
                          "TensorStructInfo", "TensorType"]),
                ("relax", tvm.relax, ["StructInfo", "TensorStructInfo", "TensorType", "ShapeType", "PrimType",
                                      "ObjectType", "TupleType", "Type"]),
            ]
            for name in names
        )),
    )


# ---------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    out_dir = argv[1] if len(argv) > 1 and not argv[1] in PROBES else "/tmp/tvm_ref"
    only = [a for a in argv[1:] if a in PROBES]
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    for name, fn in PROBES.items():
        if only and name not in only:
            continue
        try:
            text = fn()
        except Exception as e:  # pylint: disable=broad-except
            failed += 1
            text = "ERROR: " + _err(e) + "\n\n" + traceback.format_exc()
        if not text.endswith("\n"):
            text += "\n"
        with open(os.path.join(out_dir, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{name}: {'FAILED' if text.startswith('ERROR') else 'ok'}")
    with open(os.path.join(out_dir, "VERSION.txt"), "w", encoding="utf-8") as f:
        import tvm_ffi  # pylint: disable=import-outside-toplevel

        f.write(f"apache-tvm {tvm.__version__}\napache-tvm-ffi {getattr(tvm_ffi, '__version__', '?')}\n"
                f"numpy {np.__version__}\npython {sys.version.split()[0]}\n")
    print(f"wrote {out_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
