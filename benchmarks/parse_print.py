"""Parse and print speed of tvms on a large generated module, with start-up time of the CLI.

    python benchmarks/parse_print.py [--lines 5000]

Generates a module of prim_funcs (matmul, elementwise, reduction and transpose kernels with
blocks, T.init, int64 shapes, float literals) and Relax functions with dataflow blocks and
call_tir bindings, at least --lines lines long; then reports, each as the best of several runs:
lines/s for parse (text to IR) and print (IR to text), peak memory of parsing a 10,000-line
module, and the wall time of `tvms show` on a small sample in a fresh process. The goals from
the issue are printed beside the figures, with Apache TVM 0.27's figures for scale.

Then the scaling of shapes a hostile file takes (issue 12): functions with a comment each,
parameter lists, long flat sums; the time of 10x the input over the time of 1x (goal: <= 12x,
linear), and `tvms check` on a 50,000-line module with a comment on every line (goal < 5 s).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tvmscript as tvms  # noqa: E402
from _timing import best_of  # noqa: E402

KERNELS = [
    '''    @T.prim_func(private=True)
    def matmul{i}(A: T.Buffer((T.int64({m}), T.int64({k})), "float32"), B: T.Buffer((T.int64({k}), T.int64({n})), "float32"), C: T.Buffer((T.int64({m}), T.int64({n})), "float32")):
        T.func_attr({{"op_pattern": 4, "tir.noalias": True}})
        # with T.block("root"):
        for i0, i1, k in T.grid(T.int64({m}), T.int64({n}), T.int64({k})):
            with T.block("matmul"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                T.reads(A[v_i0, v_k], B[v_k, v_i1])
                T.writes(C[v_i0, v_i1])
                with T.init():
                    C[v_i0, v_i1] = T.float32(0.0)
                C[v_i0, v_i1] = C[v_i0, v_i1] + A[v_i0, v_k] * B[v_k, v_i1]
''',
    '''    @T.prim_func(private=True)
    def gelu{i}(x: T.Buffer((T.int64({m}), T.int64({n})), "float32"), out: T.Buffer((T.int64({m}), T.int64({n})), "float32")):
        T.func_attr({{"op_pattern": 0, "tir.noalias": True}})
        # with T.block("root"):
        t = T.alloc_buffer((T.int64({m}), T.int64({n})))
        for ax0, ax1 in T.grid(T.int64({m}), T.int64({n})):
            with T.block("T_multiply"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(x[v_ax0, v_ax1])
                T.writes(t[v_ax0, v_ax1])
                t[v_ax0, v_ax1] = x[v_ax0, v_ax1] * T.float32(0.70710678118654757)
        for ax0, ax1 in T.grid(T.int64({m}), T.int64({n})):
            with T.block("compute"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(x[v_ax0, v_ax1], t[v_ax0, v_ax1])
                T.writes(out[v_ax0, v_ax1])
                out[v_ax0, v_ax1] = x[v_ax0, v_ax1] * (T.float32(0.5) + T.erf(t[v_ax0, v_ax1]) * T.float32(0.5))
''',
    '''    @T.prim_func(private=True)
    def softmax_max{i}(x: T.Buffer((T.int64({m}), T.int64({n})), "float32"), out: T.Buffer((T.int64({m}),), "float32")):
        T.func_attr({{"op_pattern": 3, "tir.noalias": True}})
        # with T.block("root"):
        for i0, k in T.grid(T.int64({m}), T.int64({n})):
            with T.block("T_softmax_maxelem"):
                v_i0, v_k = T.axis.remap("SR", [i0, k])
                T.reads(x[v_i0, v_k])
                T.writes(out[v_i0])
                with T.init():
                    out[v_i0] = T.float32(-340282346638528859811704183484516925440.0)
                out[v_i0] = T.max(out[v_i0], x[v_i0, v_k])
''',
    '''    @T.prim_func(private=True)
    def transpose{i}(x: T.Buffer((T.int64({m}), T.int64({n})), "float32"), T_transpose: T.Buffer((T.int64({n}), T.int64({m})), "float32")):
        T.func_attr({{"op_pattern": 2, "tir.noalias": True}})
        # with T.block("root"):
        for ax0, ax1 in T.grid(T.int64({n}), T.int64({m})):
            with T.block("T_transpose"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(x[v_ax1, v_ax0])
                T.writes(T_transpose[v_ax0, v_ax1])
                T_transpose[v_ax0, v_ax1] = T.if_then_else(v_ax0 < T.int64({n}) and v_ax1 >= T.int64(0), x[v_ax1, v_ax0], T.float32(0.0))
''',
]

RELAX = '''    @R.function
    def main{i}(x: R.Tensor(({m}, {k}), dtype="float32"), w: R.Tensor(({k}, {n}), dtype="float32")) -> R.Tensor(({n}, {m}), dtype="float32"):
        R.func_attr({{"num_input": 1}})
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.matmul{i}, (x, w), out_sinfo=R.Tensor(({m}, {n}), dtype="float32"))
            lv1 = R.call_tir(cls.gelu{i}, (lv,), out_sinfo=R.Tensor(({m}, {n}), dtype="float32"))
            lv2: R.Tensor(({m}, {n}), dtype="float32") = R.add(lv1, lv)
            lv3: R.Tensor(({m}, {n}), dtype="float32") = R.multiply(lv2, lv1)
            lv4 = R.call_tir(cls.transpose{i}, (lv3,), out_sinfo=R.Tensor(({n}, {m}), dtype="float32"))
            gv: R.Tensor(({n}, {m}), dtype="float32") = lv4
            R.output(gv)
        return gv
'''


def generate(min_lines: int) -> str:
    """A canonical module of at least ``min_lines`` lines."""
    tir_parts, relax_parts = [], []
    lines = 5
    i = 0
    while lines < min_lines:
        m, n, k = 1 + i % 7, 16 + i % 13, 32 + i % 11
        for tmpl in KERNELS:
            text = tmpl.format(i=i, m=m, n=n, k=k)
            tir_parts.append(text)
            lines += text.count("\n") + 1
        text = RELAX.format(i=i, m=m, n=n, k=k)
        relax_parts.append(text)
        lines += text.count("\n") + 1
        i += 1
    head = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n# from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n"
    return head + "\n".join(tir_parts + relax_parts)


def _comments(n: int) -> str:
    parts = ["# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"]
    for i in range(n):
        parts.append(f'    @T.prim_func\n    def f{i}(A: T.Buffer((4,), "float32")):  # comment {i}\n'
                     f'        A[0] = T.float32(1)  # c\n\n')
    return "".join(parts)


def _params(n: int) -> str:
    params = ", ".join(f"a{i}: T.int32" for i in range(n))
    return f"# from tvm.script import tir as T\n@T.prim_func\ndef f({params}):\n    T.evaluate(0)\n"


def _flat_sum(n: int) -> str:
    terms = " + ".join(f"A[{i % 4}]" for i in range(n))
    return (f'# from tvm.script import tir as T\n@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), '
            f'B: T.Buffer((1,), "float32")):\n    B[0] = {terms}\n')


def _commented_lines(n: int) -> str:
    lines = ["# from tvm.script import tir as T", "@T.prim_func", 'def f(A: T.Buffer((4,), "float32")):']
    i = 0
    while len(lines) < n:
        lines += [f"    # note {i}", f"    A[{i % 4}] = A[{(i + 1) % 4}] + T.float32(1)  # step {i}"]
        i += 1
    return "\n".join(lines) + "\n"


def _checked(text: str) -> None:
    from tvmscript.checking import file_errors

    file_errors(text, "<bench>", 10)


def scaling_rows() -> list:
    """(measure, 1x time, 10x time, ratio, goal) for the shapes of issue 12."""
    rows = []
    for what, make, n in (("functions with a comment each", _comments, 500),
                          ("parameters of one function", _params, 4000),
                          ("terms of one flat sum", _flat_sum, 60)):
        small, large = make(n), make(10 * n)
        t1 = best_of(lambda: _checked(small), 3)
        t10 = best_of(lambda: _checked(large), 2)
        rows.append((f"check {n} -> {10 * n} {what}", f"{t1:.3f} s", f"{t10:.3f} s", f"{t10 / t1:.1f}x", "<= 12x"))
    big = _commented_lines(50_000)
    t_big = best_of(lambda: _checked(big), 2)
    rows.append(("check 50,000 lines, a comment on each", f"{t_big:.2f} s", "", "", "< 5 s"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    text = generate(args.lines)
    n_lines = text.count("\n")
    mod = tvms.parse(text)  # warm up: grammar tables, caches
    printed = mod.script()
    assert tvms.parse(printed).script() == printed
    t_parse = best_of(lambda: tvms.parse(text), args.repeat)
    t_print = best_of(lambda: mod.script(), args.repeat)

    big = generate(10_000)
    gc.collect()
    tracemalloc.start()
    tvms.parse(big)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # A bound weight of 512x512x3x3 floats (resnet18's largest) in the metadata section: 9 MB,
    # ~100,000 string pieces; reading it must stay linear in the text's length.
    import numpy as np

    weight = tvms.relax.const(np.random.default_rng(0).standard_normal((512, 512, 3, 3)).astype("float32"))
    bb = tvms.relax.BlockBuilder()
    x = tvms.relax.Var("x", tvms.relax.TensorStructInfo([512, 512, 3, 3], "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(tvms.relax.op.add(x, weight)))
    weighted = bb.get().script(show_meta=True)
    t_weight = best_of(lambda: tvms.parse(weighted), 2)

    small = os.path.join(ROOT, "samples", "mlp.tvms")
    cmd = [sys.executable, "-m", "tvmscript.cli", "show", small, "--no-color"]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the OS file cache
    t_show = best_of(lambda: subprocess.run(cmd, check=True, capture_output=True), args.repeat)
    t_python = best_of(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeat)

    rows = [
        ("parse (text -> IR)", f"{n_lines / t_parse:,.0f} lines/s", ">= 10,000 lines/s", "TVM 0.27: ~1,100 lines/s"),
        ("print (IR -> text)", f"{n_lines / t_print:,.0f} lines/s", ">= 50,000 lines/s", "TVM 0.27: ~110,000 lines/s"),
        ("peak memory, parse 10k lines", f"{peak / 2**20:,.0f} MB", "< 300 MB", ""),
        ("parse a 9 MB bound weight", f"{len(weighted) / 2**20 / t_weight:,.1f} MB/s", "", "was quadratic: ~0.2 MB/s"),
        ("tvms show samples/mlp.tvms", f"{t_show:.3f} s", "< 0.3 s", f"bare python: {t_python:.3f} s; TVM import: ~0.85 s"),
    ]
    print(f"module: {n_lines} lines; best of {args.repeat} runs\n")
    widths = [max(len(r[i]) for r in rows + [("measure", "tvms", "goal", "for scale")]) for i in range(4)]
    header = ("measure", "tvms", "goal", "for scale")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))

    scaling = scaling_rows()
    header = ("scaling (issue 12)", "1x", "10x", "ratio", "goal")
    widths = [max(len(r[i]) for r in scaling + [header]) for i in range(5)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in scaling:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
