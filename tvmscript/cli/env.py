"""``tvms env``: what a bug report needs to say about the machine, as PyTorch's
``python -m torch.utils.collect_env`` does. The versions of tvms, Python and the libraries it
runs on (LLVM through llvmlite, NVRTC, pycuda, the driver), the CPU and its vector unit, the
GPUs, the optional extras; and, per target, whether it is ready or what is missing, with the
command that installs it. Always exits 0: a missing piece is part of the report, not an error.
``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import json
import os
import platform
import sys

# Optional extras: distribution -> the extra of tvms that installs it.
EXTRAS = {"torch": "torch", "onnx": "onnx", "onnxruntime": "test", "xgboost-cpu": "tune", "pygls": "lsp",
          "lsprotocol": "lsp", "distributed": "distributed", "pycuda": "cuda", "nvidia-cuda-nvrtc": "cuda"}
REQUIRED = ("lark", "numpy", "llvmlite", "rich")


def register(sub) -> None:
    env = sub.add_parser(
        "env", help="print the versions and capabilities a bug report needs",
        description="Print tvms's version, Python's, the libraries it runs on (LLVM, NVRTC, pycuda, the CUDA "
        "driver), the CPU and GPUs, the optional extras installed, and for each target whether it is ready "
        "or what is missing. Paste it into a bug report.",
    )
    env.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    env.set_defaults(handler=env_command)


def env_command(args) -> int:
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


def collect() -> dict:
    """The report: section -> {item: text}. Each probe that fails says why in its item."""
    from ..version import __version__

    nvrtc = _nvrtc()
    return {
        "tvms": {"version": __version__, "installed at": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                 "Python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
                 "platform": platform.platform()},
        "libraries": {name: _version_of(name) or "not installed" for name in REQUIRED} | {"LLVM": _llvm_version()},
        "CPU": _cpu(),
        "CUDA": _cuda(nvrtc),
        "extras": {name: _version_of(name) or f"not installed (pip install 'tvms[{extra}]')"
                   for name, extra in EXTRAS.items()},
        "targets": _targets(nvrtc),
    }


def render(report: dict) -> str:
    lines = []
    for section, items in report.items():
        lines.append(f"{section}:")
        width = max((len(k) for k in items), default=0)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in items.items()]
    return "\n".join(lines)


def _version_of(distribution: str):
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _llvm_version() -> str:
    try:
        from llvmlite import binding

        return ".".join(map(str, binding.llvm_version_info))
    except Exception as err:  # noqa: BLE001 - reported, not raised
        return f"unknown ({type(err).__name__}: {err})"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu() -> dict:
    out = {"model": _cpu_name(), "cores": f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable)"
           if hasattr(os, "sched_getaffinity") else str(os.cpu_count())}
    try:
        from ..compiler.llvm_target import vector_unit
        from ..runtime.host_cpu import host_target

        host = host_target()
        features = set(f[1:] for f in host.features.split(",") if f.startswith("+"))
        unit = vector_unit(host)
        out["LLVM target"] = f"{host.triple}, -mcpu={host.cpu}"
        out["vector unit"] = f"{unit.bytes * 8}-bit, {unit.registers} registers"
        shown = [f for f in ("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avx512bf16",
                             "avx512fp16", "amx-tile", "neon", "sve") if f in features]
        out["features"] = " ".join(shown) or "none of note"
    except Exception as err:  # noqa: BLE001 - reported, not raised
        out["LLVM target"] = f"unknown ({type(err).__name__}: {err})"
    return out


def _nvrtc() -> tuple:
    """(NVRTC's version, None), or (None, why it cannot be loaded)."""
    try:
        from ..compiler.nvrtc import nvrtc_version

        return ".".join(map(str, nvrtc_version())), None
    except Exception as err:  # noqa: BLE001 - reported, not raised
        return None, _one_line(err)


def _cuda(nvrtc: tuple) -> dict:
    version, missing = nvrtc
    out = {"NVRTC": version or f"missing: {missing} (pip install 'tvms[cuda]')"}
    out["pycuda"] = _version_of("pycuda") or "not installed (pip install 'tvms[cuda]'; it builds against a CUDA toolkit)"
    from ..runtime.cuda import _driver_or_reason

    drv, reason = _driver_or_reason()
    if drv is None:
        out["driver"] = reason
        return out
    major, rest = divmod(drv.get_driver_version(), 1000)
    out["driver"] = f"CUDA {major}.{rest // 10}"
    for i in range(drv.Device.count()):
        gpu = drv.Device(i)
        cc = ".".join(map(str, gpu.compute_capability()))
        out[f"cuda:{i}"] = f"{gpu.name()}, compute capability {cc}, {gpu.total_memory() / (1 << 30):.1f} GiB"
    return out


def _targets(nvrtc: tuple) -> dict:
    """Per target: "ready", or what is missing."""
    out = {"llvm (CPU)": "ready"}
    missing = nvrtc[1]
    out["cuda, compiling"] = "ready" if missing is None else f"missing NVRTC: {missing} (pip install 'tvms[cuda]')"
    from ..runtime.cuda import unavailable_reason

    reason = unavailable_reason(0)
    out["cuda, running"] = "ready" if reason is None else f"not here: {reason}"
    return out


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__
