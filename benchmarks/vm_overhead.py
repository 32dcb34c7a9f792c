"""The Relax VM's own cost per call, beside the cost of calling the same kernel directly.

    python benchmarks/vm_overhead.py

A Relax function that chains N `R.call_tir` of a 1-element kernel does almost no arithmetic, so
its time is the VM's dispatch plus N kernel calls through ctypes. The table prints the time per
kernel call inside the VM next to a bare `Kernel.call_raw` of the same kernel (the floor), and
the same for a chain of no-op extern functions. The issue's goal: a few microseconds per kernel.
"""

from __future__ import annotations

import os
import sys
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import tvmscript as tvms  # noqa: E402


def chain_module(n: int, extern: bool) -> str:
    """main(x) = x + n, as n chained calls of a 1-element kernel (or of an extern no-op)."""
    lines = ["@I.ir_module", "class Module:",
             "    @T.prim_func",
             '    def add_one(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):',
             "        for i in range(1):",
             '            with T.block("b"):',
             "                vi = T.axis.spatial(1, i)",
             "                B[vi] = A[vi] + T.float32(1)",
             "",
             "    @R.function",
             '    def main(x: R.Tensor((1,), "float32")) -> R.Tensor((1,), "float32"):',
             "        cls = Module",
             "        with R.dataflow():"]
    prev = "x"
    callee = '"bench.noop"' if extern else "cls.add_one"
    op = "R.call_dps_packed" if extern else "R.call_tir"
    for i in range(n):
        lines.append(f'            lv{i} = {op}({callee}, ({prev},), out_sinfo=R.Tensor((1,), "float32"))')
        prev = f"lv{i}"
    lines += [f"            R.output({prev})", f"        return {prev}", ""]
    return "\n".join(lines)


def per_call(f, number: int = 500) -> float:
    return min(timeit.repeat(f, number=number, repeat=7)) / number


def main() -> None:
    tvms.register_func("bench.noop", lambda a, out: None, override=True)
    x = tvms.nd.array(np.zeros(1, "float32"))
    rows = []
    for n in (1, 10, 100):
        ex = tvms.compile(tvms.parse(chain_module(n, extern=False)))
        vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
        assert vm["main"](x).numpy()[0] == n
        t = per_call(lambda: vm["main"](x), number=max(50, 5000 // n))
        rows.append((f"VM, chain of {n} call_tir", f"{t * 1e6:.2f} us", f"{t / n * 1e6:.2f} us"))
    kernel = ex["add_one"]
    out = tvms.nd.array(np.zeros(1, "float32"))
    ptrs = [x.numpy().ctypes.data, out.numpy().ctypes.data]
    t_raw = per_call(lambda: kernel.call_raw(ptrs, []), number=20000)
    rows.append(("kernel.call_raw alone (the floor)", f"{t_raw * 1e6:.2f} us", f"{t_raw * 1e6:.2f} us"))
    ex = tvms.compile(tvms.parse(chain_module(100, extern=True)))
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    t = per_call(lambda: vm["main"](x), number=50)
    rows.append(("VM, chain of 100 no-op externs", f"{t * 1e6:.2f} us", f"{t / 100 * 1e6:.2f} us"))

    header = ("measure", "per VM call", "per kernel call")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print("\ngoal: a few microseconds per kernel call")


if __name__ == "__main__":
    main()
