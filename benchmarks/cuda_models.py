"""Real models on the GPU: tvms against PyTorch eager on the same GPU, in the same run.

    python benchmarks/cuda_models.py [--models resnet18_b1,gpt_b8] [--repeat 20]

Each model is exported with ``torch.export`` (random weights, seeded), imported with
``from_exported_program`` (weights bound), and compiled with ``tvms.compile(mod,
target="cuda")`` as a user would: the default pipeline folds the batch norms into the
convolutions and fuses their epilogues. Rows (the GPU speed issue's goals):

* resnet18 at batch 1 and 32, fp32 (TF32 off in PyTorch too): <= 1.0x eager's time; and at
  batch 32 with TF32 allowed on both sides (``cuda -allow_tf32=1``): <= 1.0x eager with TF32;
* resnet18 at batch 32 in mixed precision (``bound_inference_passes``, then
  ``ToMixedPrecision(out_dtype="float16")``: half operands, fp32 accumulation): <= 1.0x eager
  in float16 (``model.half()``);
* a GPT block (d_model 768, 12 heads, causal attention written out with a tril mask) at batch
  8, length 512, fp32 and float16 (``model.half()`` imported as it is): <= 1.0x each; and at
  batch 1, length 128;
* mobilenet_v2 at batch 1.

The "checks" column counts the bounds checks the build left to run time: kernels that check
in the kernel (each costs a read of the device's error record after it) / checks the host
runs before launching (free on the GPU).
Every row prints the number of kernel launches one call makes (``Executable.stats``: the
VM function's kernel call sites; resnet18's goal is at most 25) and whether its calls replay
them as one CUDA graph (the compiler's RewriteCUDAGraph: "yes", else "no" and why). That needs
NVRTC but no GPU, so without one the script prints those, says what is missing and exits 1.
The "est ms" column is one call's roofline estimate on an H200 (or the GPU present), made
without a GPU: every kernel of ``main`` runs on the CPU emulator for 2 of its blocks, counted
and scaled (benchmarks/cuda_estimates.py ``model_estimate``, about 20 s a model;
``--no-estimate`` skips it).
With a GPU, times are the GPU's: CUDA events around ``--repeat`` calls after a warm-up, the
best of three rounds (`_gpu.gpu_time` for PyTorch, ``vm.time_evaluator`` for tvms), and each
output is checked against PyTorch's first. tvms is timed twice: with CUDA graphs (as compiled,
the ratio to eager and the goal) and without (the same executable with its graph flag
cleared, kernel by kernel, as ``relax.backend.use_cuda_graph=False`` compiles it); a function
the runtime stopped capturing says why in the graph column.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from dataclasses import dataclass

import numpy as np

import _models  # noqa: F401  (puts the checkout and tests/ on sys.path)
import torch  # noqa: E402

import tvmscript as tvms  # noqa: E402
from _gpu import gpu_time  # noqa: E402
from support.torch_models import GPTBlock, import_torchvision  # noqa: E402


@dataclass(frozen=True)
class GPUCase:
    """A model at one batch size: ``make()`` builds the PyTorch module and its input (fp32);
    ``goal``: the most tvms's time may be as a multiple of eager's (None: no goal);
    ``max_launches``: the most kernel launches a call may make (None: no goal); ``precision``:
    "fp32", "tf32" (fp32 with TF32 allowed on both sides: ``cuda -allow_tf32=1`` and PyTorch's
    allow_tf32 flags), "fp16" (the half model imported as it is) or "mixed" (the fp32 model
    through ToMixedPrecision); eager runs the half model for both of the last two."""

    name: str
    make: object
    goal: float | None = 1.0
    max_launches: int | None = None
    precision: str = "fp32"


def vision(name: str, batch: int):
    def make():
        tv = import_torchvision()
        torch.manual_seed(0)
        return getattr(tv.models, name)(weights=None).eval(), torch.randn(batch, 3, 224, 224)
    return make


def gpt_block(batch: int, length: int, dim: int = 768, heads: int = 12):
    def make():
        torch.manual_seed(0)
        return GPTBlock(dim, heads, length, sdpa=False).eval(), torch.randn(batch, length, dim)
    return make


CASES = [
    GPUCase("resnet18_b1", vision("resnet18", 1), max_launches=25),
    GPUCase("resnet18_b32", vision("resnet18", 32), max_launches=25),
    GPUCase("resnet18_b32_tf32", vision("resnet18", 32), max_launches=25, precision="tf32"),
    GPUCase("resnet18_b32_mixed", vision("resnet18", 32), max_launches=25, precision="mixed"),
    GPUCase("gpt_b8_s512", gpt_block(8, 512)),
    GPUCase("gpt_b8_s512_fp16", gpt_block(8, 512), precision="fp16"),
    GPUCase("gpt_b1_s128", gpt_block(1, 128)),
    GPUCase("mobilenet_v2_b1", vision("mobilenet_v2", 1)),
]


def compiled(case: GPUCase):
    """The PyTorch model eager runs and its input, tvms's executable (compiled for CUDA) and
    its input: the same tensor, but for "mixed", whose eager model and input are half while
    tvms's ``main`` still takes the fp32 input (ToMixedPrecision casts inside)."""
    from tvmscript import relax
    from tvmscript.relax.frontend.torch import from_exported_program

    model, x = case.make()
    if case.precision in ("fp16", "mixed"):
        half_model, half_x = copy.deepcopy(model).half(), x.half()  # .half() converts in place
    if case.precision == "fp16":
        model, x = half_model, half_x
    mod = from_exported_program(_models.export(model, x), unwrap_unit_return_tuple=True)
    ours = x
    if case.precision == "mixed":
        # Batch norms fold into the convolutions before the casts ToMixedPrecision writes around them.
        mod = relax.transform.bound_inference_passes("main", "cuda")(mod)
        mod = relax.transform.ToMixedPrecision(out_dtype="float16")(mod)
        model, x = half_model, half_x
    return model, x, tvms.compile(mod, target=target_of(case)), ours


def target_of(case: GPUCase) -> str:
    return "cuda -allow_tf32=1" if case.precision == "tf32" else "cuda"


def launches(ex) -> int:
    return ex.functions["main"].num_kernel_calls


def bounds_checks(ex) -> str:
    """The bounds checks the build left to run time (`compiler.codegen_cuda.checks`), as
    "kernels/host": the kernels that check in the kernel (each then a read of the error record
    after it) and the checks the host runs before launching (free on the GPU)."""
    functions = [f for f in ex.kernels.values() if getattr(f, "checks", None) is not None]
    return f"{sum(f.checks.device for f in functions)}/{sum(len(f.checks.host) for f in functions)}"


def graph_note(ex) -> str:
    """Whether calls of ``main`` replay a CUDA graph, as compiled: "yes", or "no: why"."""
    f = ex.functions["main"]
    return "yes" if f.cuda_graph else f"no: {f.cuda_graph_note}"


def without_graphs(ex):
    """``ex`` with no function marked for CUDA graphs: a VM runs it kernel by kernel, as if it
    was compiled with ``relax.backend.use_cuda_graph`` off (compiling again would be slower)."""
    functions = {name: dataclasses.replace(f, cuda_graph=False, cuda_graph_note="turned off to compare")
                 for name, f in ex.functions.items()}
    return tvms.Executable(ex.mod, ex.target, ex.kernels, functions, cuda_code=ex.cuda_code)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(c.name for c in CASES),
                    help="comma-separated: " + ", ".join(c.name for c in CASES))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--no-estimate", action="store_true", help="skip the roofline estimates (est ms)")
    ap.add_argument("--profile", action="store_true",
                    help="after each model's row, its kernels' GPU times (VirtualMachine.profile, kernel by kernel)")
    args = ap.parse_args()
    wanted = args.models.split(",")
    unknown = sorted(set(wanted) - {c.name for c in CASES})
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}")
    from tvmscript.runtime.cuda import unavailable_reason

    reason = unavailable_reason(0)
    import cuda_estimates
    from tvmscript.compiler import roofline

    gpu = "h200" if reason else cuda_estimates.gpu_present(torch)
    print(f"{'model':<18} {'launches':>8} {'checks':>7} {'est ms':>8} {'tvms ms':>9} {'no graph':>9} {'eager ms':>9} "
          f"{'ratio':>7}  goal; CUDA graph")
    met = total = 0
    for case in (c for c in CASES if c.name in wanted):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = case.precision == "tf32"
        model, x, ex, ours_x = compiled(case)
        n, checked = launches(ex), bounds_checks(ex)
        checks = []
        if case.max_launches is not None:
            checks.append(n <= case.max_launches)
        launch_goal = f"<= {case.max_launches} launches" if case.max_launches is not None else ""
        est = "" if args.no_estimate else f"{estimate_ms(ex, gpu, target_of(case)):8.3f}"
        if reason:
            total += len(checks)
            met += sum(checks)
            goal = f"{launch_goal}; " if launch_goal else ""
            print(f"{case.name:<18} {n:>8} {checked:>7} {est:>8} {'':>9} {'':>9} {'':>9} {'':>7}  {goal}graph "
                  f"{graph_note(ex)}")
            continue
        try:
            ours, plain, eager, graph, report = time_on_gpu(model, x, ex, args.repeat, args.profile, ours_x)
        except Exception as err:  # a wrong output or a failed launch: say so, and go on to the next model
            total += len(checks) + (case.goal is not None)
            met += sum(checks)
            print(f"{case.name:<18} {n:>8} {checked:>7} {est:>8}  FAILED: {type(err).__name__}: {err}")
            continue
        ratio = ours / eager
        if case.goal is not None:
            checks.append(ratio <= case.goal)
        total += len(checks)
        met += sum(checks)
        goals = ", ".join(g for g in (launch_goal, f"<= {case.goal:g}x eager" if case.goal else "") if g)
        verdict = "met" if all(checks) else "NOT met"
        print(f"{case.name:<18} {n:>8} {checked:>7} {est:>8} {ours * 1e3:9.3f} {plain * 1e3:9.3f} {eager * 1e3:9.3f} "
              f"{ratio:7.2f}  {goals}: {verdict}; graph {graph}")
        if report is not None:
            print(report)
    print(f"goals met: {met} of {total}")
    if not args.no_estimate:
        print(f"est ms: one call estimated on the {roofline.gpu_spec(gpu).name} from the CPU emulator's counters "
              "(compiler/roofline.py, benchmarks/cuda_estimates.py)")
    if reason:
        print(f"the times need a GPU: {reason}")
        return 1
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__} (TF32 off but in the tf32 row)")
    return 0


def estimate_ms(ex, gpu, target: str) -> float:
    """One call of ``main``, estimated on ``gpu`` from the emulator's counters."""
    import cuda_estimates

    return cuda_estimates.model_estimate(ex, target, gpu).seconds * 1e3


def time_on_gpu(model, x, ex, repeat: int, profile: bool = False, ours_x=None) -> tuple:
    """Seconds per call of tvms with CUDA graphs, of tvms kernel by kernel and of PyTorch eager
    on the GPU, after checking that their outputs agree; what served the graphed calls ("yes: N
    replays", or "no: why"); and with ``profile``, the kernel-by-kernel call's
    `VirtualMachine.profile` report (each launch synchronized: a kernel's time is its own).
    Eager runs on ``x``, tvms on ``ours_x`` (``x`` when None)."""
    dev = tvms.cuda(0)
    gx = tvms.nd.array((x if ours_x is None else ours_x).numpy(), dev)
    model = model.cuda()
    tx = x.cuda()
    tol = 1e-3 if x.dtype == torch.float32 and not torch.backends.cudnn.allow_tf32 else 2e-2
    times = []
    with torch.no_grad():
        ref = model(tx).float().cpu().numpy()
        for executable in (ex, without_graphs(ex)):
            vm = tvms.relax.VirtualMachine(executable, dev)
            for _ in range(2):  # the first call captures, the second replays
                out = vm["main"](gx).numpy().astype("float32")
                err = float(np.abs(out - ref).max() / max(float(np.abs(ref).max()), 1e-30))
                if err > tol:
                    raise AssertionError(f"tvms's output differs from PyTorch's: relative error {err:.2e}")
            times.append(min(vm.time_evaluator("main", dev, number=repeat, repeat=3)(gx).results))
            if executable is ex:
                stats = vm.cuda_graph_stats()["main"]
                graph = f"yes: {stats['replays']} replays" if stats["fallback"] is None else f"no: {stats['fallback']}"
        report = vm.profile("main", gx, repeat=5) if profile else None
        eager = gpu_time(lambda: model(tx), repeat, torch)
    return times[0], times[1], eager, graph, report


if __name__ == "__main__":
    sys.exit(main())
