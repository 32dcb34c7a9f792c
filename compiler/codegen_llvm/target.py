"""LLVM itself: the CPU the kernels are for, LLVM's initialization, and its optimizer.

`HostTarget` names the CPU (this machine's, `host_target`, or one an ``llvm -mcpu=...``
target names, see `compiler.llvm_target`) and makes LLVM's target machine for it; `init_llvm`
initializes LLVM once per process, with the options that keep it from aborting on valid IR
(`avoid_llvm_aborts`); `optimize` runs LLVM's new pass manager over a generated module.
Nothing here knows TIR: the runtime uses it to load what was compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import llvmlite.binding as llvm


@dataclass(frozen=True)
class HostTarget:
    """The CPU kernels are generated for: LLVM's triple, CPU name and feature string. By
    default the machine's own (`host_target`); an ``llvm -mcpu=... -mattr=...`` target names
    another (`compiler.llvm_target`). ``complete``: ``features`` lists every feature of the
    CPU, as LLVM detected them where the code was built (so another CPU with all of them runs
    it); False when the CPU was named and ``features`` holds only the ``-mattr`` given on top
    of it."""

    triple: str
    cpu: str
    features: str
    complete: bool = True

    def unrunnable_on(self, host: "HostTarget") -> Optional[str]:
        """Why code generated for this target cannot run on ``host`` (it could stop the
        process with an illegal instruction), or None when it can."""
        if self.triple.split("-")[0] != host.triple.split("-")[0]:
            return f"the code is for {self.triple}, and this machine is {host.triple}"
        if not self.complete and self.cpu != host.cpu:
            return (f"the code is for -mcpu={self.cpu}, and this machine's CPU is a {host.cpu}, which may lack "
                    f"instructions a {self.cpu} has")
        have = {f[1:] for f in host.features.split(",") if f.startswith("+")}
        need = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        missing = sorted(need - have)
        if missing:
            return (f"the code is for a CPU with {', '.join('+' + m for m in missing[:6])}"
                    f"{' ...' if len(missing) > 6 else ''}, which this one ({host.cpu}) lacks")
        return None

    def target_machine(self, opt: int = 3):
        """Position-independent code: the same machine code is JIT-loaded, kept in the disk
        cache and linked into a shared library by ``export_library`` (non-PIC code there
        would need text relocations)."""
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                            reloc="pic", codemodel="jitdefault")


_initialized = False

# LLVM's own options that keep its optimizer off code paths known to abort the process on
# valid IR, each as narrow as LLVM allows (`init_llvm` sets them; see `avoid_llvm_aborts`).
LLVM_WORKAROUND_OPTIONS = ("-slp-copyable-elements=false",)


def init_llvm() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
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


@lru_cache(maxsize=None)
def host_target() -> HostTarget:
    """The machine we run on: its triple, CPU name (``znver3``, ``skylake-avx512``...) and
    feature string (``+avx2,+fma,...``), as LLVM detects them."""
    init_llvm()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some hosts cannot report features
        features = ""
    return HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)


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
