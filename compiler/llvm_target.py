"""The CPU an ``llvm`` target names, checked against what LLVM knows: ``-mcpu``, ``-mattr``
and ``-mtriple`` become the `HostTarget` the CPU kernels are generated for.

    cpu_target(Target("llvm"))                               # this machine's CPU, as LLVM detects it
    cpu_target(Target("llvm -mcpu=skylake-avx512"))          # code for that CPU
    cpu_target(Target("llvm -mattr=-avx512f"))               # this CPU, without AVX-512
    cpu_target(Target("llvm -mcpu=bogus"))                   # ValueError naming this CPU and a few others

Why the names are checked here: LLVM does not refuse a name it does not know. It prints
"'bogus' is not a recognized processor for this target (ignoring processor)" on standard
error and generates code for a generic CPU, and it aborts the process outright on a feature
written without its ``+``/``-``, on a 32-bit CPU for a 64-bit triple (``-mcpu=i686``) and on
``-mattr=-64bit``. llvmlite has no call listing LLVM's processors and features, so:

* the lists come from the table LLVM prints for ``-mcpu=help``, and
* a CPU and features the process has not compiled for before are first tried in a child
  process (a ``python -c`` that only imports llvmlite, ~0.1 s), which may abort without
  taking tvms with it.

Both are kept on disk (`tvmscript.cache`, subfolder ``llvm-targets``, keyed by the LLVM
version) and in memory, so only the first use of a new ``-mcpu`` on a machine pays for them,
and a target without ``-mcpu``/``-mattr``/``-mtriple`` (the default) pays nothing.

Code generated for another CPU is there to print (``tvms compile --emit asm``) and to export
(``export_library``), and refuses to run in this process unless this CPU can run it
(`HostTarget.unrunnable_on`).

`vector_unit` says what the default CPU schedule sizes its tiles by for a target: the width
of its widest vector registers and how many there are, asked of LLVM for the CPU named.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from tvmscript.runtime.host_cpu import HostTarget, host_target

__all__ = ["cpu_target", "unrunnable_here", "llvm_cpus", "llvm_features", "VectorUnit", "vector_unit"]


def cpu_target(target) -> HostTarget:
    """The CPU to generate ``target``'s kernels for (a `tvms.target.Target` of kind ``llvm``
    or ``c``); a ValueError saying what LLVM knows instead for a CPU, feature or triple it
    cannot generate code for."""
    attrs = target.attrs
    return _cpu_target(attrs.get("mtriple"), attrs.get("mcpu"), tuple(attrs.get("mattr", ())))


def unrunnable_here(target) -> Optional[str]:
    """Why the kernels ``target`` generates could not run on this machine (a CPU it may not
    be, or features it lacks), or None when they can."""
    return cpu_target(target).unrunnable_on(host_target())


def llvm_cpus() -> list:
    """The CPU names LLVM knows for this machine's architecture (``-mcpu=``)."""
    return sorted(_tables(host_target().triple)["cpus"])


def llvm_features() -> list:
    """The feature names LLVM knows for this machine's architecture (``-mattr=+name``)."""
    return sorted(_tables(host_target().triple)["features"])


@lru_cache(maxsize=64)
def _cpu_target(mtriple: Optional[str], mcpu: Optional[str], mattr: tuple) -> HostTarget:
    host = host_target()
    if mtriple is None and mcpu is None and not mattr:
        return host
    if mtriple is not None:
        _check_triple(mtriple, host)
    _check_feature_signs(mattr)
    tables = _tables(host.triple)
    if mcpu is not None:
        _check_cpu(mcpu, tables["cpus"], host)
    _check_features(mattr, tables["features"], host)
    if mcpu is None or mcpu == host.cpu:  # this CPU, its features changed by -mattr
        built_for = HostTarget(host.triple, host.cpu, ",".join(filter(None, (host.features, *mattr))))
    else:
        built_for = HostTarget(host.triple, mcpu, ",".join(mattr), complete=False)
    if built_for != host:
        _check_llvm_compiles(built_for, mcpu, mattr)
    return built_for


# ----------------------------------------------------------------------------- vector registers


@dataclass(frozen=True)
class VectorUnit:
    """The vector registers of a CPU: the bytes of the widest and how many there are."""

    bytes: int
    registers: int


@lru_cache(maxsize=64)
def vector_unit(target: HostTarget) -> VectorUnit:
    """The vector registers LLVM generates ``target``'s code with.

    On x86-64 LLVM is asked: the widths of the registers it selects for a 64-byte float
    vector (zmm with AVX-512: 32 registers of 64 bytes; ymm with AVX: 16 of 32; else xmm, 16
    of 16). Asking, rather than reading ``+avx512f`` in the feature string, also covers a CPU
    given by name (``-mcpu=haswell``: its features are LLVM's, not in the string) and features
    switched off with the ones that depend on them (``-mattr=-avx``). AArch64 has 32 NEON
    registers of 16 bytes (tvms generates fixed-width vectors, never SVE's); elsewhere 16 of
    16 bytes is assumed."""
    arch = target.triple.split("-")[0]
    if arch in ("x86_64", "amd64"):
        asm = target.target_machine().emit_assembly(_parsed_probe(target.triple))
        if "zmm" in asm:
            return VectorUnit(64, 32)
        return VectorUnit(32 if "ymm" in asm else 16, 16)
    if arch in ("aarch64", "arm64"):
        return VectorUnit(16, 32)
    return VectorUnit(16, 16)


# A 64-byte float vector loaded, added and stored: LLVM keeps it in one register as wide as
# the CPU has (up to 64 bytes), or splits it over narrower ones.
_VECTOR_PROBE = """target triple = "{triple}"
define void @probe(ptr %p) {{
  %a = load <16 x float>, ptr %p
  %b = fadd <16 x float> %a, %a
  store <16 x float> %b, ptr %p
  ret void
}}
"""


def _parsed_probe(triple: str):
    import llvmlite.binding as llvm

    return llvm.parse_assembly(_VECTOR_PROBE.format(triple=triple))


# ----------------------------------------------------------------------------- the checks


def _check_triple(mtriple: str, host: HostTarget) -> None:
    """tvms generates code for the machine it runs on: a triple is accepted when it names that
    machine (vendor aside: ``x86_64-linux-gnu`` is ``x86_64-unknown-linux-gnu``)."""
    def parts(triple: str) -> tuple:
        arch, *rest = triple.split("-")
        return arch, frozenset(rest) - {"unknown", "pc", ""}

    if parts(mtriple) != parts(host.triple):
        raise ValueError(f"-mtriple={mtriple}: tvms generates CPU code for this machine, {host.triple} "
                         "(cross-compiling for another is not supported); leave -mtriple out")


def _check_feature_signs(mattr: tuple) -> None:
    for feature in mattr:
        if feature[:1] not in ("+", "-") or len(feature) < 2:
            raise ValueError(f"-mattr={','.join(mattr)}: write each feature with + to enable it or - to disable "
                             f"it (such as +avx2 or -avx512f), not {feature!r}")


def _check_cpu(mcpu: str, cpus: list, host: HostTarget) -> None:
    if mcpu in cpus:
        return
    arch = host.triple.split("-")[0]
    near = _near(mcpu, cpus) or _near(host.cpu, [c for c in cpus if c != host.cpu])
    raise ValueError(f"-mcpu={mcpu} is not a CPU LLVM knows for {arch}: this machine's is {host.cpu} (leave "
                     f"-mcpu out to compile for it), and others are {', '.join(near)}, ... ({len(cpus)} in all)")


def _check_features(mattr: tuple, features: list, host: HostTarget) -> None:
    arch = host.triple.split("-")[0]
    for feature in mattr:
        name = feature[1:]
        if name in features:
            continue
        near = _near(name, features)
        if near:
            hint = f"did you mean {' or '.join('+' + n for n in near)}?"
        else:
            has = sorted(f for f in host.features.split(",") if f.startswith("+"))
            hint = f"this CPU ({host.cpu}) has {', '.join(has[:8])}{', ...' if len(has) > 8 else ''}"
        raise ValueError(f"-mattr={','.join(mattr)}: {name!r} is not a feature LLVM knows for {arch}; {hint}")


def _near(name: str, names: list) -> list:
    return difflib.get_close_matches(name, names, n=4, cutoff=0.6)


def _check_llvm_compiles(built_for: HostTarget, mcpu: Optional[str], mattr: tuple) -> None:
    """LLVM generates code for ``built_for`` without aborting, tried in a child process."""
    result = _child_result("compiles", built_for.triple, built_for.cpu, built_for.features)
    if result != "ok":
        asked = " ".join(filter(None, (f"-mcpu={mcpu}" if mcpu else "", f"-mattr={','.join(mattr)}" if mattr else "")))
        raise ValueError(f"{asked}: LLVM cannot generate {built_for.triple} code for it ({result})")


# ----------------------------------------------------------------------------- LLVM, in a child process

# Run as ``python -c _CHILD TASK TRIPLE CPU FEATURES``: "tables" prints LLVM's -mcpu=help table
# on standard error; "compiles" compiles a small function for CPU and FEATURES. LLVM reports
# an error by printing it and aborting, which only the child suffers.
_CHILD = r"""
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
task, triple, cpu, features = sys.argv[1:5]
target = llvm.Target.from_triple(triple)
if task == "tables":
    target.create_target_machine(cpu="help")
else:
    machine = target.create_target_machine(cpu=cpu, features=features, reloc="pic", codemodel="jitdefault")
    module = llvm.parse_assembly(
        'target triple = "%s"\ndefine void @f(ptr %%p) {\n  store <4 x float> zeroinitializer, ptr %%p\n'
        '  ret void\n}\n' % triple)
    machine.emit_object(module)
    print("ok")
"""


def _tables(triple: str) -> dict:
    """``{"cpus": [...], "features": [...]}``: LLVM's names for ``triple``'s architecture."""
    return json.loads(_child_result("tables", triple, "", ""))


@lru_cache(maxsize=None)
def _child_result(task: str, triple: str, cpu: str, features: str) -> str:
    """What the child says for ``task`` ("tables": JSON of the names; "compiles": "ok" or
    LLVM's error), from the disk cache when an earlier process asked the same."""
    import llvmlite
    import llvmlite.binding as llvm

    from tvmscript import cache as disk_cache

    version = f"{llvmlite.__version__}/{'.'.join(map(str, llvm.llvm_version_info))}"
    key = hashlib.sha256(f"{version}|{task}|{triple}|{cpu}|{features}".encode()).hexdigest()
    folder = disk_cache.folder("llvm-targets")
    path = os.path.join(folder, key) if folder else None
    stored = disk_cache.read(path, _MAGIC) if path else None
    if stored is not None:
        return stored.decode("utf-8")
    result = _ask_child(task, triple, cpu, features)
    if path and (task == "tables" or result == "ok"):
        disk_cache.write(path, _MAGIC, result.encode("utf-8"))
    return result


_MAGIC = b"TVMSLLVMTARGET1"


def _ask_child(task: str, triple: str, cpu: str, features: str) -> str:
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, task, triple, cpu, features],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ValueError(f"cannot ask LLVM about -mcpu/-mattr (its check runs in a child process: {err})") from None
    if task == "tables":
        return json.dumps(_parse_help(proc.stderr))
    if proc.returncode == 0 and proc.stdout.strip() == "ok":
        return "ok"
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    fatal = [line.split("LLVM ERROR:", 1)[1].strip() for line in lines if "LLVM ERROR:" in line]
    return fatal[0] if fatal else (lines[-1] if lines else f"it stopped with status {proc.returncode}")


def _parse_help(text: str) -> dict:
    """The names in LLVM's ``-mcpu=help`` table: "Available CPUs for this target:" then one
    ``  name - description`` line each, then the same for "Available features"."""
    tables: dict = {"cpus": [], "features": []}
    section = None
    for line in text.splitlines():
        if line.startswith("Available CPUs"):
            section = "cpus"
        elif line.startswith("Available features"):
            section = "features"
        elif section and line.startswith("  ") and line.split():
            tables[section].append(line.split()[0])
        elif line.strip() and not line.startswith(" "):
            section = None
    if not tables["cpus"] or not tables["features"]:
        raise ValueError("cannot check -mcpu/-mattr: LLVM did not print its table of CPUs and features")
    return tables
