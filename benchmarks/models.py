"""Whole models on the CPU: tvms beside PyTorch eager and onnxruntime, each model imported both ways.

    python benchmarks/models.py [--models resnet18,gpt] [--threads 2] [--rounds 20] [--quick]

The models (benchmarks/_models.py, random weights): torchvision's resnet18, mobilenet_v2 and
vit_b_16 at batch 1 and 224x224; two GPT blocks (d_model 256, 8 heads, causal self-attention
written out in PyTorch with a tril mask, GELU MLP) at sequence length 128 (``gpt``), and the same
blocks exported with a dynamic length, compiled once and run at lengths 7, 128 and 300
(``gpt_dynamic``; ``--models gpt`` picks both). Each is

* imported with ``from_exported_program`` (row "torch") and, where ``torch.onnx.export`` and
  ``from_onnx`` take it, from its ONNX export (row "onnx"), the weights bound as constants,
  compiled with ``tvms.compile(mod, "llvm")`` (its default pipeline, bounds checks on, as
  ``tvms run`` compiles);
* checked against PyTorch (the largest error relative to the output's largest magnitude;
  above 1e-3 the row says WRONG and the goal is not met), and onnxruntime's result too;
* timed against PyTorch eager (``torch.no_grad``) and onnxruntime (the same ONNX export) in
  the same process, the calls alternated (`_timing.alternated`: in each round, each one's
  calls for ~50 ms after an untimed one; the median of all), everything on ``--threads``
  threads (``OMP_NUM_THREADS``, which tvms's parallel loops read, ``torch.set_num_threads``,
  onnxruntime's ``intra_op_num_threads``). tvms loads libgomp before torch is imported, so
  torch's parallel regions share tvms's libgomp and its wait policy (`runtime.cpu`).

A row per model and import: tvms, eager and onnxruntime milliseconds, the ratios, and the
issue's goal (resnet18, mobilenet_v2: <= 0.8x eager and <= 1.0x onnxruntime; vit_b_16: <= 0.9x
eager, <= 1.0x onnxruntime; the GPT blocks: <= 0.9x eager, <= 1.0x onnxruntime), met or not.
Under each model, the profile of the torch import's call (`VirtualMachine.profile`, what ``tvms
run --profile`` prints): its kernels, and the three that take the most time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2,vit_b_16,gpt",
                        help="comma-separated: resnet18, mobilenet_v2, vit_b_16, gpt (both GPT cases), "
                             "gpt_dynamic (default: all)")
    parser.add_argument("--threads", type=int, default=2, help="threads for tvms, PyTorch and onnxruntime (default 2)")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per model and input (default 20)")
    parser.add_argument("--quick", action="store_true", help="5 timed rounds: a smoke run")
    return parser.parse_args(argv)


def pick(cases: list, names: str) -> list:
    """The cases ``--models`` names: a name picks the cases it names or that start with it
    followed by "_" (``gpt`` is ``gpt`` and ``gpt_dynamic``)."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if not any(c.name == n or c.name.startswith(n + "_") for c in cases)]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(c.name for c in cases)}")
    return [c for c in cases if any(c.name == n or c.name.startswith(n + "_") for n in wanted)]


@dataclass
class Imported:
    """One import of a model compiled for the CPU: its VM, or why there is none."""

    how: str
    vm: object = None
    why: str = ""
    seconds: float = 0.0

    @classmethod
    def build(cls, how: str, make) -> "Imported":
        """``make()``'s VM and the seconds it took, or what it raised: an importer's limit is
        a result of this benchmark, not its end."""
        t0 = time.perf_counter()
        try:
            return cls(how, make(), seconds=time.perf_counter() - t0)
        except Exception as err:  # noqa: BLE001
            return cls(how, why=f"{type(err).__name__}: {first_line(err)}", seconds=time.perf_counter() - t0)


def first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:120] if text else ""


def compiled_from_torch(program):
    """The VM of an ExportedProgram imported by ``from_exported_program``, weights bound."""
    from _models import compile_bound
    from tvmscript.relax.frontend.torch import from_exported_program

    return compile_bound(from_exported_program(program, unwrap_unit_return_tuple=True))


def import_both(case, model, example):
    """(torch import, ONNX import, onnxruntime session or None) of one case."""
    import onnxruntime as ort

    from _models import compile_bound, export_case, onnx_model
    from tvmscript.relax.frontend.onnx import from_onnx

    via_torch = Imported.build("torch", lambda: compiled_from_torch(export_case(case, model, example)))
    try:
        proto = onnx_model(case, model, example)
    except Exception as err:  # noqa: BLE001
        return via_torch, Imported("onnx", why=f"torch.onnx.export failed: {type(err).__name__}: {first_line(err)}"), None
    via_onnx = Imported.build("onnx", lambda: compile_bound(from_onnx(proto)))
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ["OMP_NUM_THREADS"])
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return via_torch, via_onnx, session


def run_case(case, rounds: int, profile_repeat: int) -> list:
    """Import, check and time one case; print its rows and profile, return [(met, row name)]."""
    model, example = case.make()
    via_torch, via_onnx, session = import_both(case, model, example)
    for i in (via_torch, via_onnx):
        built = f"imported and compiled in {i.seconds:.1f} s" if i.vm is not None else f"not run: {i.why}"
        print(f"  {case.name} via {i.how}: {built}")
    imports = [i for i in (via_torch, via_onnx) if i.vm is not None]
    results = []
    for x in case.inputs(example):
        label = case.name + (f" T={x.shape[1]}" if case.dynamic else "")
        results += time_input(label, case.goal, model, x, imports, session, rounds)
    if case.dynamic and via_torch.vm is not None:
        results += time_fixed_length(case, model, example, via_torch, rounds)
    print_profile(via_torch, example, profile_repeat)
    return results


FIXED_LENGTH_GOAL = 1.1  # symbolic shapes keep their speed: the dynamic build within 10% of the static one


def time_fixed_length(case, model, example, dynamic, rounds: int) -> list:
    """The dynamic-length build against the same model compiled with the example's length
    fixed, both via torch and timed in the same alternated rounds at that length (so that the
    machine's drift between rows cannot count as the symbolic shapes' cost)."""
    import tvmscript as tvms
    from _models import export
    from _timing import alternated

    fixed = Imported.build("torch", lambda: compiled_from_torch(export(model, example)))
    label = f"{case.name} T={example.shape[1]}: dynamic / fixed length"
    if fixed.vm is None:
        print(f"  {label}: fixed-length build not run: {fixed.why}")
        return [(False, label)]
    arg = tvms.nd.array(example.numpy())
    t_dynamic, t_fixed = alternated([lambda: dynamic.vm["main"](arg), lambda: fixed.vm["main"](arg)], rounds)
    met = t_dynamic / t_fixed <= FIXED_LENGTH_GOAL
    print(f"{label}: {t_dynamic * 1e3:.2f} / {t_fixed * 1e3:.2f} ms = {t_dynamic / t_fixed:.2f}x  "
          f"<= {FIXED_LENGTH_GOAL}x  {'met' if met else 'not met'}")
    return [(met, label)]


def time_input(label: str, goal, model, x, imports: list, session, rounds: int) -> list:
    """Check each import's result at input ``x`` against PyTorch's, time them beside PyTorch
    eager and onnxruntime, print a row per import; return [(met, row name)]."""
    import torch

    import tvmscript as tvms
    from _models import relative_error
    from _timing import alternated

    with torch.no_grad():
        expected = model(x).numpy()
    arg, feeds = tvms.nd.array(x.numpy()), {"x": x.numpy()}
    errors = [relative_error(i.vm["main"](arg).numpy(), expected) for i in imports]

    def eager():
        with torch.no_grad():
            model(x)

    fns = [(lambda vm=i.vm: vm["main"](arg)) for i in imports] + [eager]
    if session is not None:
        fns.append(lambda: session.run(None, feeds))
    times = alternated(fns, rounds)
    t_eager = times[len(imports)]
    t_ort = times[len(imports) + 1] if session is not None else None
    results = []
    for i, t, error in zip(imports, times, errors):
        met = error <= MAX_ERROR and goal.met(t / t_eager, t_ort and t / t_ort)
        results.append((met, f"{label} via {i.how}"))
        print(row(label, i.how, t, t_eager, t_ort, goal, met, error))
    if session is not None:
        print(f"  (onnxruntime's own error against PyTorch: {relative_error(session.run(None, feeds)[0], expected):.1e})")
    return results


MAX_ERROR = 1e-3  # relative to the output's largest magnitude: above it a row is WRONG
HEADER = (f"{'model':<20} {'import':<6} {'tvms ms':>9} {'eager ms':>9} {'ort ms':>9} {'/eager':>7} {'/ort':>7}"
          f"  {'goal':<30} {'':<7} {'rel. error':>10}")


def row(label, how, t, t_eager, t_ort, goal, met, error) -> str:
    ort_ms = f"{t_ort * 1e3:9.2f}" if t_ort else f"{'-':>9}"
    ort_ratio = f"{t / t_ort:6.2f}x" if t_ort else f"{'-':>7}"
    verdict = "WRONG" if error > MAX_ERROR else ("met" if met else "not met")
    return (f"{label:<20} {how:<6} {t * 1e3:9.2f} {t_eager * 1e3:9.2f} {ort_ms} {t / t_eager:6.2f}x {ort_ratio}"
            f"  {str(goal):<30} {verdict:<7} {error:10.1e}")


def print_profile(imported, example, repeat: int) -> None:
    """The kernels of the torch import's call at the example input, the three heaviest first."""
    import tvmscript as tvms
    from _timing import SWITCH_PAUSE

    if imported.vm is None:
        return
    time.sleep(SWITCH_PAUSE)  # onnxruntime's workers spin after its last call: 1.8 ms read 5.2 ms
    report = imported.vm.profile("main", tvms.nd.array(example.numpy()), repeat=repeat)
    calls = sum(n for _, n, _ in report.rows)
    top = ", ".join(f"{k} {t * 1e3:.2f} ms ({100 * t / report.total:.0f}%, {n} call{'s' * (n != 1)})"
                    for k, n, t in report.rows[:3])
    print(f"  profile at {tuple(example.shape)}: {len(report.rows)} kernels, {calls} kernel calls, "
          f"{report.total * 1e3:.2f} ms a call (VM {report.vm_time * 1e3:.2f} ms); top: {top}")


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before tvms, torch and onnxruntime load
    rounds = 5 if args.quick else args.rounds

    from tvmscript.runtime import cpu as tvms_cpu

    tvms_cpu.parallel_runtime()  # libgomp loads with tvms's wait policy, which torch then shares
    import onnxruntime
    import torch

    from _models import CASES

    torch.set_num_threads(args.threads)
    cases = pick(CASES, args.models)
    print(f"threads: {args.threads} (tvms OMP_NUM_THREADS, torch.set_num_threads, onnxruntime intra_op_num_threads); "
          f"PyTorch {torch.__version__}, onnxruntime {onnxruntime.__version__}; parallel runtime "
          f"{tvms_cpu.parallel_runtime()} ({tvms_cpu.wait_policy()}); medians of {rounds} alternated rounds")
    print(HEADER)
    results = []
    for case in cases:
        results += run_case(case, rounds, profile_repeat=10)
    met = sum(m for m, _ in results)
    print(f"goals met: {met} of {len(results)}" +
          (f"; not met: {', '.join(n for m, n in results if not m)}" if met < len(results) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
