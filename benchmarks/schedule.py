"""How long schedule primitives and the default GPU schedules take.

    python benchmarks/schedule.py                 # tvms only
    TVMS_TVM_PYTHON=/path/to/tvm-venv/bin/python python benchmarks/schedule.py

1. One primitive on a 5-deep loop nest (a batched matmul with a fused bias: b, i, j, k, plus
   the bias block): each primitive timed alone on a fresh schedule, best of N. Goal: < 5 ms.
2. DLight's default GPU schedules (Matmul, GEMV, Reduction, GeneralReduction, Fallback) on
   every PrimFunc of a legalized 300-op Relax module (benchmarks/pipeline.py's 75-layer MLP).
   Goal: < 2 s.

With ``TVMS_TVM_PYTHON`` naming the Python of a virtual environment holding Apache TVM 0.27,
the same steps run through TVM in that process and the figures print side by side as ratios.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tvmscript as tvms  # noqa: E402
from _timing import best_of  # noqa: E402
from pipeline import mlp_source  # noqa: E402

NEST = '''
@T.prim_func
def main(A: T.Buffer((4, 64, 64), "float32"), B: T.Buffer((4, 64, 64), "float32"), bias: T.Buffer((64,), "float32"), D: T.Buffer((4, 64, 64), "float32")):
    C = T.alloc_buffer((4, 64, 64))
    for b, i, j, k, u in T.grid(4, 64, 64, 16, 4):
        with T.block("C"):
            vb, vi, vj, vk, vu = T.axis.remap("SSSRR", [b, i, j, k, u])
            with T.init():
                C[vb, vi, vj] = T.float32(0)
            C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk * 4 + vu] * B[vb, vk * 4 + vu, vj]
    for b, i, j in T.grid(4, 64, 64):
        with T.block("D"):
            vb, vi, vj = T.axis.remap("SSS", [b, i, j])
            D[vb, vi, vj] = C[vb, vi, vj] + bias[vj]
'''

# (label, steps): setup lines run untimed, the last line is the primitive timed.
PRIMITIVES = [
    ("split", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], "sch.split(l[2], factors=[None, 8])"),
    ("fuse", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], "sch.fuse(l[0], l[1], l[2])"),
    ("reorder", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], "sch.reorder(l[3], l[4], l[2], l[1])"),
    ("bind", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], 'sch.bind(l[0], "blockIdx.x")'),
    ("reverse_compute_at", ['b0 = sch.get_block("C")', 'b1 = sch.get_block("D")', "l = sch.get_loops(b0)"],
     "sch.reverse_compute_at(b1, l[2])"),
    ("cache_read", ['b0 = sch.get_block("C")'], 'sch.cache_read(b0, 0, "shared")'),
    ("cache_write", ['b0 = sch.get_block("C")'], 'sch.cache_write(b0, 0, "local")'),
    ("decompose_reduction", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], "sch.decompose_reduction(b0, l[3])"),
    ("rfactor", ['b0 = sch.get_block("C")', "l = sch.get_loops(b0)"], "sch.rfactor(l[4], 0)"),
]


def tvms_primitive_times(repeat: int) -> dict:
    func = tvms.parse(NEST)
    out = {}
    for label, setup, step in PRIMITIVES:
        env: dict = {}

        def fresh():
            sch = tvms.tir.Schedule(func)
            env["sch"] = sch
            for line in setup:
                exec(line, env)

        def timed():
            exec(step, env)

        if not hasattr(tvms.tir.Schedule, step.split("(")[0].split(".")[1]):
            continue
        times = []
        for _ in range(repeat):
            fresh()
            times.append(best_of(timed, 1))
        out[label] = min(times)
    return out


DLIGHT_RULES = "dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()"


def tvms_dlight_time(text: str, repeat: int) -> tuple[float, int]:
    from tvmscript import dlight as dl
    from tvmscript.compiler.transform import LegalizeOps
    from tvmscript.target import Target

    mod = LegalizeOps()(tvms.parse(text))
    n_prim = sum(1 for _, f in mod.functions.items() if isinstance(f, tvms.tir.PrimFunc))
    rules = eval(f"[{DLIGHT_RULES}]", {"dl": dl})

    def apply():
        with Target("cuda -arch=sm_90"):
            dl.ApplyDefaultSchedule(*rules)(mod)

    return best_of(apply, repeat), n_prim


TVM_SCRIPT = r'''
import sys, time, json
import tvm
from tvm import s_tir, relax
from tvm.s_tir import dlight as dl
nest, mlp, repeat = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
prims = json.loads(open(sys.argv[4]).read())
from tvm.script import tirx as T
nest = nest.replace("T.block(", "T.sblock(").replace("@T.prim_func", "@T.prim_func(s_tir=True)")
func = tvm.script.from_source(nest, extra_vars={"T": T})
out = {}
for label, setup, step in prims:
    best = 1e9
    for _ in range(repeat):
        sch = s_tir.Schedule(func)
        env = {"sch": sch}
        for line in setup:
            exec(line.replace("get_block(", "get_sblock("), env)
        t0 = time.perf_counter(); exec(step, env); best = min(best, time.perf_counter() - t0)
    out[label] = best
from tvm.script import ir as I, relax as R
best = 1e9
for _ in range(max(1, repeat // 5)):
    # A fresh module each time: the pass marks the functions it scheduled, in place.
    mod = relax.transform.LegalizeOps()(tvm.script.from_source(mlp, extra_vars={"T": T, "I": I, "R": R}))
    t0 = time.perf_counter()
    with tvm.target.Target({"kind": "cuda", "arch": "sm_90"}):
        dl.ApplyDefaultSchedule(RULES)(mod)
    best = min(best, time.perf_counter() - t0)
out["dlight"] = best
print(json.dumps(out))
'''.replace("RULES", DLIGHT_RULES)


def tvm_reference(text: str, repeat: int):
    python = os.environ.get("TVMS_TVM_PYTHON")
    if not python:
        return None
    import json

    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("nest.py", "mlp.tvms", "prims.json")]
        for path, content in zip(paths, (NEST, text, json.dumps(PRIMITIVES))):
            with open(path, "w") as f:
                f.write(content)
        proc = subprocess.run([python, "-c", TVM_SCRIPT, paths[0], paths[1], str(repeat), paths[2]],
                              capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"(TVM reference failed: {proc.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    repeat = 20
    text = mlp_source(75)
    ref = tvm_reference(text, repeat)
    times = tvms_primitive_times(repeat)
    print("One primitive on a 5-deep loop nest (best of %d, fresh schedule each time; goal < 5 ms):" % repeat)
    for label, t in times.items():
        line = f"  {label:22s} tvms {t * 1e3:7.3f} ms"
        if ref and label in ref:
            line += f"   TVM {ref[label] * 1e3:7.3f} ms   tvms/TVM = {t / ref[label]:.2f}"
        print(line)
    n_ops = text.count(" = R.")
    t, n_prim = tvms_dlight_time(text, repeat=3)
    print(f"DLight default GPU schedules on a legalized {n_ops}-op module ({n_prim} PrimFuncs; goal < 2 s):")
    line = f"  tvms {t * 1e3:8.1f} ms"
    if ref and "dlight" in ref:
        line += f"   TVM {ref['dlight'] * 1e3:8.1f} ms   tvms/TVM = {t / ref['dlight']:.2f}"
    print(line)


if __name__ == "__main__":
    main()
