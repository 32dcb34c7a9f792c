"""How long the transformations and a cold ``tvms run`` take.

    python benchmarks/pipeline.py                 # tvms only
    TVMS_TVM_PYTHON=/path/to/tvm-venv/bin/python python benchmarks/pipeline.py

1. LegalizeOps plus the zero pipeline (AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR) on
   a generated Relax function of 300 ops (a 75-layer MLP: matmul, add, relu, multiply, with
   three hidden sizes so the PrimFuncs do not all deduplicate). Goal: under 1 s.
2. ``tvms run samples/mlp.tvms`` in a fresh process (import, parse, pipeline, compile, run),
   beside a bare ``python -c pass``. Goal: under 1 s wall time.

With ``TVMS_TVM_PYTHON`` naming the Python of a virtual environment holding Apache TVM, the
same module goes through TVM's LegalizeOps + zero pipeline in that process, and ``import tvm``
is timed, so the figures print side by side (TVM is never needed otherwise).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tvmscript as tvms  # noqa: E402
from _timing import best_of  # noqa: E402
from tvmscript.compiler.transform import LegalizeOps, get_pipeline  # noqa: E402

SIZES = (32, 48, 64)


def mlp_source(layers: int) -> str:
    """A Relax function of 4 ops per layer: h = relu(h @ w + b) * s."""
    params = ['x: R.Tensor((8, 32), "float32")', 's: R.Tensor((), "float32")']
    body = []
    h, width = "x", 32
    for i in range(layers):
        out = SIZES[(i + 1) % len(SIZES)]
        params += [f'w{i}: R.Tensor(({width}, {out}), "float32")', f'b{i}: R.Tensor(({out},), "float32")']
        body += [f"            m{i} = R.matmul({h}, w{i})", f"            a{i} = R.add(m{i}, b{i})",
                 f"            r{i} = R.nn.relu(a{i})", f"            h{i} = R.multiply(r{i}, s)"]
        h, width = f"h{i}", out
    lines = ["@I.ir_module", "class Module:", "    @R.function", f"    def main({', '.join(params)}):",
             "        with R.dataflow():", *body, f"            R.output({h})", f"        return {h}", ""]
    return "\n".join(lines)


def tvms_pipeline_time(text: str, repeat: int) -> tuple[float, float, int]:
    mod = tvms.parse(text)
    legal = best_of(lambda: LegalizeOps()(mod), repeat)
    whole = best_of(lambda: get_pipeline("zero")(mod), repeat)
    out = get_pipeline("zero")(mod)
    return legal, whole, len(out.functions)


TVM_SCRIPT = r'''
import sys, time
t0 = time.perf_counter(); import tvm; from tvm import relax; t_import = time.perf_counter() - t0
text = open(sys.argv[1]).read()
mod = tvm.script.from_source(text)
best = 1e9
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter(); relax.get_pipeline("zero")(mod); best = min(best, time.perf_counter() - t0)
print(t_import, best)
'''


def tvm_reference(text: str, repeat: int):
    python = os.environ.get("TVMS_TVM_PYTHON")
    if not python:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.tvms")
        with open(path, "w") as f:
            f.write(text)
        proc = subprocess.run([python, "-c", TVM_SCRIPT, path, str(repeat)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"(TVM reference failed: {proc.stderr.strip().splitlines()[-1:]})")
        return None
    t_import, best = map(float, proc.stdout.split())
    return t_import, best


def cold_run_times(repeat: int) -> tuple[float, float]:
    tvms_cmd = [sys.executable, "-m", "tvmscript.cli", "run", os.path.join(ROOT, "samples", "mlp.tvms")]
    bare = [sys.executable, "-c", "pass"]
    run_t, bare_t = [], []
    for _ in range(repeat):  # interleaved, so load changes hit both
        for cmd, out in ((tvms_cmd, run_t), (bare, bare_t)):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
            out.append(time.perf_counter() - t0)
    return statistics.median(run_t), statistics.median(bare_t)


def main() -> None:
    text = mlp_source(75)
    n_ops = text.count(" = R.")
    legal, whole, n_funcs = tvms_pipeline_time(text, repeat=5)
    print(f"LegalizeOps + zero pipeline on a {n_ops}-op Relax function ({n_funcs} functions after):")
    print(f"  tvms LegalizeOps alone      {legal * 1e3:8.1f} ms")
    print(f"  tvms legalize + zero        {whole * 1e3:8.1f} ms   (goal < 1000 ms)")
    ref = tvm_reference(text, repeat=3)
    if ref is not None:
        t_import, t_tvm = ref
        print(f"  TVM  legalize + zero        {t_tvm * 1e3:8.1f} ms   tvms/TVM = {whole / t_tvm:.2f}")
    run_t, bare_t = cold_run_times(repeat=5)
    print("cold `tvms run samples/mlp.tvms` (fresh process: import, parse, pipeline, compile, run), median of 5:")
    print(f"  tvms run                    {run_t * 1e3:8.1f} ms   (goal < 1000 ms)")
    print(f"  python -c pass              {bare_t * 1e3:8.1f} ms   tvms run / bare python = {run_t / bare_t:.1f}")
    if ref is not None:
        print(f"  import tvm (TVM)            {ref[0] * 1e3:8.1f} ms   tvms run / import tvm = {run_t / ref[0]:.2f}")


if __name__ == "__main__":
    main()
