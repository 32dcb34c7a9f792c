"""The CPU kernels are generated for, and the one this process runs on.

A `HostTarget` names a CPU as LLVM does (triple, CPU name, features). The compiler generates
code for one (`compiler.llvm_target` makes it from ``llvm -mcpu=... -mattr=...``), and the
runtime refuses to run code whose target this machine is not (`HostTarget.unrunnable_on`):
a kernel using an instruction the CPU lacks would stop the process, not raise. Both the JIT
and a shared library loaded later (`runtime.library`) check, so the class and the detection
of this machine's CPU (`host_target`) live here, below the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import llvmlite.binding as llvm

__all__ = ["HostTarget", "host_target", "init_native_target"]


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
        init_native_target()
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                            reloc="pic", codemodel="jitdefault")


_initialized = False


def init_native_target() -> None:
    """LLVM's native target and assembly printer, which making a target machine, JIT-loading
    machine code and printing assembly need (once per process)."""
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialized = True


@lru_cache(maxsize=None)
def host_target() -> HostTarget:
    """The machine we run on: its triple, CPU name (``znver3``, ``skylake-avx512``...) and
    feature string (``+avx2,+fma,...``), as LLVM detects them."""
    init_native_target()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some hosts cannot report features
        features = ""
    return HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)
