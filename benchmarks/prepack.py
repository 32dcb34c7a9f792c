"""Bound weights packed once at compile time, beside the same build packing them on every call.

    python benchmarks/prepack.py [--models gpt,gpt_dynamic] [--rounds 20] [--threads 2]

Models of benchmarks/models.py (by default the GPT blocks: ``gpt`` at 128 tokens;
``gpt_dynamic`` compiled once, run at 7, 128 and 300 tokens; also resnet18, mobilenet_v2,
vit_b_16), imported with ``from_exported_program`` and compiled as
``compile_bound`` does (weights bound as constants), twice: as ``tvms.compile`` builds them
(its kernels read the weights in the panel layout the build packed them into,
compiler/prepack_constants.py), and with that step left out (`mark_layout_free` skipped: the
kernels copy each weight into panels on every call). The outputs are checked equal bit for
bit, then both are timed alternately in this process (`_timing.alternated`); the ratio is
packed-at-compile-time over packed-on-each-call.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt,gpt_dynamic", help="comma-separated names of benchmarks/models.py's cases")
    ap.add_argument("--rounds", type=int, default=20, help="alternated rounds per input")
    ap.add_argument("--threads", type=int, default=2, help="threads of tvms's parallel loops")
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import numpy as np

    import tvmscript as tvms
    from _models import CASES, compile_bound, export_case
    from _timing import alternated
    from tvmscript.relax.frontend.torch import from_exported_program

    print(f"threads: {args.threads}; medians of {args.rounds} alternated rounds")
    print(f"{'model':12s} {'tokens':>6s} {'compile-time ms':>16s} {'each-call ms':>13s} {'ratio':>7s}")
    for case in [c for c in CASES if c.name in args.models.split(",")]:
        model, example = case.make()
        mod = from_exported_program(export_case(case, model, example), unwrap_unit_return_tuple=True)
        packed_once, packed_each_call = compile_bound(mod), _without_prepacking(lambda: compile_bound(mod))
        for x in case.inputs(example):
            arg = tvms.nd.array(x.numpy())
            once, each = packed_once["main"](arg).numpy(), packed_each_call["main"](arg).numpy()
            if not np.array_equal(once, each):
                print(f"{case.name}: the two builds' results differ", file=sys.stderr)
                return 1
            t_once, t_each = alternated([lambda: packed_once["main"](arg), lambda: packed_each_call["main"](arg)],
                                        args.rounds)
            tokens = x.shape[1] if case.dynamic or case.name == "gpt" else ""
            print(f"{case.name:12s} {tokens:>6} {t_once * 1e3:16.3f} {t_each * 1e3:13.3f} {t_once / t_each:6.2f}x")
    return 0


def _without_prepacking(build):
    """``build()`` with no kernel parameter marked layout-free: each call packs its panels."""
    import tvmscript.compiler.build as build_module

    marked = build_module.mark_layout_free
    build_module.mark_layout_free = lambda mod: mod
    try:
        return build()
    finally:
        build_module.mark_layout_free = marked


if __name__ == "__main__":
    sys.exit(main())
