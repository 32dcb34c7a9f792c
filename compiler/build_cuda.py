"""The CUDA build: prim_funcs to CUDA C and NVRTC's CUBIN (or PTX), as a `cuda_spec.CUDACode`.

Functions that no schedule has bound to GPU threads get DLight's default GPU schedules first
(`default_gpu_schedule`), and a function a default schedule leaves unrunnable falls back to one
thread per output element. Whole builds are cached by what they were built from
(`compiler.build_cache`), in memory and on disk. Needs no GPU: the runtime (`runtime.cuda`)
loads the code onto one when something runs there.
"""

from __future__ import annotations

import re

from tvmscript import ir

from .build_error import BuildError

__all__ = ["build_cuda", "clear_cuda_cache", "cuda_target", "default_gpu_schedule"]


def cuda_target(target):
    """``target`` as a CUDA `Target`, and the architecture to compile for: the one the target
    names (``cuda -arch=sm_80``), else the GPU's own when one is present, else the target's
    default (an H100, sm_90)."""
    from tvmscript.target import Target

    explicit = False
    if isinstance(target, str):
        explicit = "-arch" in target
        target = Target(target)
    elif isinstance(target, dict):
        explicit = "arch" in target
        target = Target(target)
    elif isinstance(target, Target):
        explicit = True
    arch = str(target.attrs.get("arch") or "sm_90")
    if not explicit:
        try:
            from tvmscript.runtime.cuda import device_arch, unavailable_reason

            found = device_arch(0) if unavailable_reason(0) is None else None
        except Exception:  # noqa: BLE001 - no pycuda, no GPU: the default architecture
            found = None
        arch = found or arch
    return target, arch


def default_gpu_schedule(mod, target):
    """DLight's default GPU schedules (`tvms.dlight`), as TVM's default CUDA pipeline applies
    them, for the prim_funcs of ``mod`` that no schedule has bound to threads yet; and tvms's
    own: `MatmulSIMT` and `MatmulSplitK` before `Matmul` (fp32 products of many tiles; of few
    tiles and a long K), `SmallReduction` before the reductions' rules (one thread per output
    of a depthwise convolution or a pooling window), `WarpRowReduction` before
    `GeneralReduction` (a warp per row of a softmax or layer norm of many short rows) and
    `ElementWise` before the Fallback, for 16-byte accesses."""
    from . import dlight as dl

    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.MatmulTensorCore(), dl.gpu.MatmulSIMT(), dl.gpu.MatmulSplitK(),
                                       dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.LowBatchGEMV(),
                                       dl.gpu.SmallReduction(), dl.gpu.Reduction(), dl.gpu.WarpRowReduction(),
                                       dl.gpu.GeneralReduction(), dl.gpu.Transpose(), dl.gpu.ElementWise(),
                                       dl.gpu.Fallback())(mod)


def _fallback_schedule(name: str, func, target):
    from . import dlight as dl

    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.Fallback())(ir.IRModule({name: func}))[name]


# Whole CUDA builds (schedules, CUDA C, NVRTC's output) by what they were built from: a
# rebuild of the same functions in this process or the next skips all three.
_cuda_builds = None


def clear_cuda_cache() -> None:
    """Forget the CUDA builds made in this process (the disk cache stays)."""
    if _cuda_builds is not None:
        _cuda_builds.clear()


def build_cuda(prim_funcs: dict, target="cuda", kind: str = "cubin", trace: bool = False, bounds_check: bool = True):
    """CUDA C and NVRTC's CUBIN for ``prim_funcs``, as a `cuda_spec.CUDACode` (``kind="ptx"``:
    PTX instead; ``kind="source"``: the CUDA C alone, NVRTC not needed). Functions without
    thread bindings get the default GPU schedules first. Needs no GPU. The result is cached
    (`compiler.build_cache`): in memory, and on disk keyed by the functions' structure, the
    target, the kind, tvms's source and NVRTC's version. ``trace`` (with ``kind="source"``):
    the printer's trace mode (`codegen_cuda.trace`), CUDA C for the CPU emulator's counters.
    ``bounds_check``: accesses to global memory that are not proven in bounds are checked at
    run time, on the host where they depend only on sizes (`codegen_cuda.checks`)."""
    global _cuda_builds
    from . import nvrtc
    from .build_cache import BuildCache

    if kind not in ("cubin", "ptx", "source"):
        raise ValueError(f"kind must be 'cubin', 'ptx' or 'source', not {kind!r}")
    if trace and kind != "source":
        raise ValueError("trace mode prints CUDA C for the CPU emulator only: use kind='source'")
    target, arch = cuda_target(target)
    try:
        version = nvrtc.nvrtc_version() if kind != "source" else None
    except nvrtc.NVRTCUnavailable as err:
        raise BuildError(str(err)) from None
    if _cuda_builds is None:
        _cuda_builds = BuildCache("cuda-builds", b"TVMSCUDABUILD3")  # 3: CUDAFunction.checks
    funcs = dict(prim_funcs)
    key = ("cuda", str(target), arch, kind, version, bool(bounds_check)) + (("trace",) if trace else ())
    make = (lambda: _build_cuda(funcs, target, arch, kind, trace=True, bounds_check=bounds_check)) if trace else \
        (lambda: _build_cuda(funcs, target, arch, kind, bounds_check=bounds_check))
    return _cuda_builds.build(funcs, key, make, lambda code: {"code": code}, lambda entry: entry["code"])


def feature_arch(source: str, arch: str) -> str:
    """``arch`` with its ``a`` suffix when ``source`` uses Hopper's architecture-specific
    instructions (wgmma), which NVRTC compiles only for ``sm_90a``: such code runs on that GPU
    only, which the CUBIN for the exact architecture is anyway."""
    if "tvms_wgmma_" in source and arch == "sm_90":
        return "sm_90a"
    return arch


def _build_cuda(prim_funcs: dict, target, arch: str, kind: str, trace: bool = False, bounds_check: bool = True):
    from . import nvrtc
    from .codegen_cuda import codegen_cuda
    from .cuda_spec import CUDACode
    from .kernel_places import numbered_spans
    from .kernel_resources import parse_ptxas_log
    from .lower_gpu import GPULoweringError, has_thread_bindings
    from .schedule import ScheduleError

    # Numbered before the schedules move them: the runtime numbers the PrimFuncs it was given.
    places = {n: numbered_spans(f) for n, f in prim_funcs.items()} if bounds_check else None
    unscheduled = {n: f for n, f in prim_funcs.items() if not has_thread_bindings(f)}
    if unscheduled:
        try:
            scheduled = default_gpu_schedule(ir.IRModule(dict(unscheduled)), target)
        except ScheduleError as err:
            raise BuildError(f"the default GPU schedules failed: {err}") from None
        prim_funcs = {n: (scheduled[n] if n in unscheduled else f) for n, f in prim_funcs.items()}
    fallen_back: set = set()
    while True:
        try:
            src = codegen_cuda(prim_funcs, trace, arch, bounds_check, places)
            break
        except GPULoweringError as err:
            name = getattr(err, "func_name", None)
            if name in unscheduled and name not in fallen_back:
                # A default schedule the GPU cannot run as is (a rule bound only part of a
                # function): the one that always works, one thread per output element.
                fallen_back.add(name)
                prim_funcs = dict(prim_funcs)
                prim_funcs[name] = _fallback_schedule(name, unscheduled[name], target)
                continue
            raise BuildError(str(err), getattr(prim_funcs.get(name), "span", None)) from None
    arch = feature_arch(src.source, arch)
    if kind == "source":
        return CUDACode(src.source, src.functions, arch)
    try:
        result = nvrtc.compile_cuda(src.source, arch, kind=kind)
    except nvrtc.NVRTCError as err:
        raise _nvrtc_build_error(err, src, prim_funcs) from None
    except (nvrtc.NVRTCUnavailable, ValueError) as err:
        raise BuildError(str(err)) from None
    code = CUDACode(src.source, src.functions, arch, nvrtc_version=nvrtc.nvrtc_version())
    if kind == "cubin":
        code.cubin = result.binary
        code.ptxas = parse_ptxas_log(result.log)
    else:
        code.ptx = result.binary.decode("utf-8", "replace")
    code.compile_seconds = result.seconds
    return code


def _nvrtc_build_error(err, src, prim_funcs) -> BuildError:
    """A BuildError quoting NVRTC's log, naming the kernel its first error is in and pointing
    at that kernel's prim_func."""
    log = err.log.strip()
    kernel = func_name = None
    m = re.search(r"\((\d+)\): (?:catastrophic )?error", log)
    if m:
        line = int(m.group(1))
        for sym, (first, last) in src.kernel_lines.items():
            if first <= line <= last:
                kernel, func_name = sym, src.kernel_funcs[sym]
    where = f" in kernel '{kernel}' (prim_func '{func_name}')" if kernel else ""
    quoted = "\n".join("    " + x for x in log.splitlines()[:40])
    return BuildError(f"NVRTC could not compile the CUDA code{where}:\n{quoted}",
                      getattr(prim_funcs.get(func_name), "span", None))
