"""LLVM itself: the CPU the kernels are for, LLVM's initialization, and its optimizer.

The CPU is a `runtime.host_cpu.HostTarget` (this machine's, `host_target`, or one an
``llvm -mcpu=...`` target names, see `compiler.llvm_target`): the runtime checks loaded code
against it without the compiler. `init_llvm` initializes LLVM once per process, with the options that keep it from aborting on valid IR
(`avoid_llvm_aborts`); `optimize` runs LLVM's new pass manager over a generated module.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from tvmscript.runtime.host_cpu import init_native_target


_initialized = False

# LLVM's own options that keep its optimizer off code paths known to abort the process on
# valid IR, each as narrow as LLVM allows (`init_llvm` sets them; see `avoid_llvm_aborts`).
LLVM_WORKAROUND_OPTIONS = ("-slp-copyable-elements=false",)


def init_llvm() -> None:
    global _initialized
    if not _initialized:
        init_native_target()
        avoid_llvm_aborts()
        _initialized = True


def avoid_llvm_aborts() -> None:
    """Set `LLVM_WORKAROUND_OPTIONS`: a kernel must never kill the process compiling it.

    ``-slp-copyable-elements=false``: LLVM 22.1's SLP vectorizer (llvmlite 0.50) fails the
    assertion "must be scheduled at this point" in ``BoUpSLP::scheduleBlock`` and aborts when a
    bundle it vectorizes by modeling a lane as a "copyable element" (``x`` taken as ``x op
    identity`` to match its neighbours) holds an instruction using one value as two operands,
    such as ``llvm.fmuladd(d, w, d)``. Linear resizes make exactly that once their loops are
    unrolled and folded: where a point's two neighbours clamp to the same pixel, ``a * (1 - f)
    + b * f`` becomes ``fmuladd(a, f, a)``. 221 of 1225 small align_corners resize2d shapes
    aborted on a znver5, some with every linear mode and some for skylake-avx512; resize3d too.

    The option turns off only that modeling; the SLP vectorizer still runs. Of the 471 modules
    tvms's op tests compile, 461 came out the same and 10 tiny fully unrolled ones (resizes,
    norms, attention) differently but no slower; resizes, norms and attention at model sizes
    came out the same. The same abort upstream: llvm/llvm-project#164164 (on ``fshl(%x, %x,
    2)``), open when this was written. An LLVM without the option ignores it (llvmlite discards
    errors in the options it is given). LLVM keeps options per process: other llvmlite users
    in this process (numba) compile without copyable elements too."""
    for option in LLVM_WORKAROUND_OPTIONS:
        llvm.set_option("tvms", option)


def optimize(llmod, tm, speed_level: int = 2) -> None:
    """LLVM's new pass manager, its default pipeline at ``speed_level`` (O1 to O3) with loop
    and SLP vectorization.

    Loops are unrolled and vector loops interleaved only where the IR asks for it (loop
    metadata from the kernels' annotations, see `StmtGen.annotation_props`), not by LLVM's
    heuristics: those unroll and interleave every loop they can, which multiplies the code LLVM
    then optimizes and selects instructions for (the seed MLP compiled in ~350 ms instead of
    ~80 ms at O3) while the kernels, memory-bound or limited by their loop order, ran no
    faster."""
    init_llvm()  # its workarounds hold for every module optimized, whoever made the target machine
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = False  # only where forced by loop metadata
    pto.loop_interleaving = False
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(llmod, pb)
