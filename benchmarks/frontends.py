"""Importers and imported models: import time, and run time beside PyTorch eager.

    python benchmarks/frontends.py [--repeat 20]
    TVMS_TVM_PYTHON=/work/tvmref/bin/python python benchmarks/frontends.py   # with TVM 0.27's import time

Three measures, each printed with its reference from the same run, as a ratio:

1. importing torchvision's resnet18 (weights=None) from an ExportedProgram with
   ``from_exported_program`` (best of several); with ``TVMS_TVM_PYTHON`` naming the Python of
   a venv holding Apache TVM and torch, TVM's ``from_exported_program`` on the same model in
   that process (its default, which first runs torch's decompositions). Goal: < 3 s.
2. the imported resnet18, batch 1, through the zero pipeline and ``tvms.compile`` on the CPU
   (what ``tvms run`` does), against PyTorch eager (``torch.no_grad``) on the same input with
   the same number of threads. Goal: ≤ 3x PyTorch's time.
3. a GPT-style model (tests/support/torch_models.py: embeddings, two blocks of causal self-attention
   and GELU MLP with residuals, d_model 256, 8 heads), sequence length 128, the same way.
   Goal: ≤ 3x PyTorch's time.

Times are medians of alternating rounds (tvms, then PyTorch), so load from other processes
hits both alike. Outputs are checked against PyTorch before timing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # support.torch_models: the models the tests import

import torch  # noqa: E402

import tvmscript as tvms  # noqa: E402
from _models import export, relative_error  # noqa: E402
from _timing import alternated, best_of  # noqa: E402
from support.torch_models import GPT, import_torchvision  # noqa: E402
from tvmscript.relax.frontend import detach_params  # noqa: E402
from tvmscript.relax.frontend.torch import from_exported_program  # noqa: E402

# TVM's import of the same model, run in TVM's venv: prints the best import time in seconds.
TVM_SCRIPT = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
from support.torch_models import import_torchvision
from tvm.relax.frontend.torch import from_exported_program
tv = import_torchvision()
torch.manual_seed(0)
model = tv.models.resnet18(weights=None).eval()
with torch.no_grad():
    ep = torch.export.export(model, (torch.randn(1, 3, 224, 224),))
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    from_exported_program(ep, keep_params_as_input=True)
    best = min(best, time.perf_counter() - t0)
print(best)
'''


def compile_for_cpu(mod):
    """What `tvms run` does: the zero pipeline, then compile for the host CPU."""
    mod, params = detach_params(mod)
    mod = tvms.relax.get_pipeline("zero")(mod)
    t0 = time.perf_counter()
    ex = tvms.compile(mod, "llvm")
    compile_s = time.perf_counter() - t0
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    return vm["main"], [tvms.nd.array(p.numpy()) for p in params["main"]], compile_s


def run_vs_torch(name: str, model, example, rounds: int, goal: float) -> None:
    mod = from_exported_program(export(model, example), keep_params_as_input=True, unwrap_unit_return_tuple=True)
    func, params, compile_s = compile_for_cpu(mod)
    x = tvms.nd.array(example.numpy())
    with torch.no_grad():
        expected = model(example).numpy()
    got = func(x, *params).numpy()
    error = relative_error(got, expected)
    assert error <= 1e-4, f"{name}: tvms differs from PyTorch by {error:.2e}"

    def torch_call():
        with torch.no_grad():
            model(example)

    t_tvms, t_torch = alternated([lambda: func(x, *params), torch_call], rounds)
    ratio = t_tvms / t_torch
    print(f"{name:<28} tvms {t_tvms * 1e3:8.2f} ms   PyTorch eager {t_torch * 1e3:8.2f} ms   "
          f"ratio {ratio:5.2f}x   goal <= {goal:g}x {'ok' if ratio <= goal else 'MISSED'}   "
          f"(compile {compile_s:.1f} s, rel. error {error:.1e})")


def tvm_import_time(repeat: int):
    python = os.environ.get("TVMS_TVM_PYTHON")
    if not python:
        return None
    proc = subprocess.run([python, "-c", TVM_SCRIPT, os.path.join(ROOT, "tests"), str(repeat)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"(TVM reference failed: {proc.stderr.strip().splitlines()[-1:]})")
        return None
    return float(proc.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed rounds per model (default 20)")
    args = parser.parse_args()

    threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())  # what libgomp uses
    torch.set_num_threads(threads)
    print(f"threads: {threads} (tvms and PyTorch {torch.__version__})")
    tv = import_torchvision()

    torch.manual_seed(0)
    resnet = tv.models.resnet18(weights=None).eval()
    image = torch.randn(1, 3, 224, 224)
    ep = export(resnet, image)
    t_import = best_of(lambda: from_exported_program(ep, keep_params_as_input=True), 3)
    t_tvm = tvm_import_time(3)
    beside = f"   TVM 0.27 {t_tvm:.3f} s   ratio {t_import / t_tvm:.2f}x" if t_tvm else \
        "   (TVMS_TVM_PYTHON unset: no TVM figure)"
    print(f"{'import resnet18 (ExportedProgram)':<28} tvms {t_import:.3f} s{beside}   goal < 3 s "
          f"{'ok' if t_import < 3 else 'MISSED'}")

    run_vs_torch("resnet18, batch 1", resnet, image, args.repeat, 3.0)
    torch.manual_seed(0)
    gpt = GPT(vocab=512, dim=256, heads=8, max_len=128).eval()
    tokens = torch.randint(0, 512, (1, 128), generator=torch.Generator().manual_seed(0))
    run_vs_torch("GPT (2 blocks), length 128", gpt, tokens, args.repeat, 3.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
