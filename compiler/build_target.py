"""The targets `build` compiles for, and the options of each it acts on.

A target is given as TVM's are (a string such as ``"llvm -mcpu=skylake"``, a dict, a
`tvms.target.Target`); `checked_target` accepts it only when tvms acts on every option in it
(an option tvms would silently ignore is an error instead), `target_name_of` names it, and
`cpu_build_options` turns an ``llvm`` target into what `compiler.build_cpu.build_cpu` takes.
"""

from __future__ import annotations

__all__ = ["SUPPORTED_TARGETS", "target_name_of", "checked_target", "cpu_build_options"]

SUPPORTED_TARGETS = ("llvm", "c", "cuda")


def target_name_of(target) -> str:
    """The target's name: its text as given (``"llvm -mcpu=skylake"``), else its kind
    (``"llvm"`` for None); the errors of `checked_target`."""
    checked = checked_target(target)
    return target if isinstance(target, str) else checked.kind.name


# The options of each kind that tvms's backends act on. A `Target` takes every option TVM's
# takes (tvmscript/target.py); compiling with one that tvms would ignore is an error instead.
_ACTED_ON = {
    "llvm": ("mcpu", "mattr", "mtriple", "opt-level"),
    "c": ("mcpu",),
    "cuda": ("arch", "max_threads_per_block", "max_num_threads", "max_shared_memory_per_block", "allow_tf32"),
}

# Options that describe the target without directing the compiler (TVM's tags carry them):
# accepted, though no pass of tvms consults the last three yet.
_DESCRIPTIVE = ("keys", "device", "model", "tag", "thread_warp_size", "registers_per_block", "l2_cache_size_bytes")

# Why tvms does not act on an option TVM's Target takes, and what does what it asks for.
_NOT_ACTED_ON = {
    "num-cores": "parallel loops run on OMP_NUM_THREADS threads: set that variable instead",
    "libs": "tvms compiles every op itself and calls no vendor library",
    "fast-math": "tvms keeps IEEE float semantics",
    "mcpu": "a CUDA GPU's architecture is -arch, such as -arch=sm_80",  # for cuda; llvm acts on it
}


def checked_target(target) -> "Target":
    """``target`` (a string, a dict, a `tvms.target.Target`, or None for ``llvm``) as a
    `Target` tvms can compile for. ValueError for an unknown kind or option (`Target`'s), an
    option tvms would ignore, or a CPU or feature LLVM does not know (`llvm_target`);
    NotImplementedError for a kind tvms cannot compile for yet."""
    from tvmscript.target import Target, UnknownTargetOption

    try:
        checked = Target("llvm" if target is None else target)
    except UnknownTargetOption as err:
        if err.kind not in _ACTED_ON:
            raise
        raise ValueError(err.with_options(f"the options tvms compiles '{err.kind}' with are",
                                          _options_text(err.kind))) from None
    kind = checked.kind.name
    if kind not in SUPPORTED_TARGETS:
        raise NotImplementedError(f"target '{kind}' is not supported yet: tvms compiles for the CPU ('llvm') "
                                  "and NVIDIA GPUs ('cuda')")
    acted_on = _ACTED_ON[kind]
    for name in sorted(checked.attrs):
        if name not in acted_on and name not in _DESCRIPTIVE:
            why = _NOT_ACTED_ON.get(name, "not supported yet")
            raise ValueError(f"tvms does not act on -{name} ({why}); the options it compiles '{kind}' with are "
                             f"{', '.join(_options_text(kind))}")
    if kind == "cuda" and checked.thread_warp_size != 32:
        raise ValueError(f"-thread_warp_size={checked.thread_warp_size}: NVIDIA GPUs run warps of 32 threads")
    if kind != "cuda":
        level = checked.attrs.get("opt-level", 3)
        if not 0 <= level <= 3:
            raise ValueError(f"-opt-level={level}: LLVM's optimization levels are 0 to 3")
        from .llvm_target import cpu_target

        cpu_target(checked)
    return checked


def _options_text(kind: str) -> list:
    return ["-" + n for n in _ACTED_ON[kind]]


def cpu_build_options(target) -> dict:
    """`compiler.build_cpu.build_cpu`'s ``target`` and ``opt_level`` for an ``llvm`` (or ``c``)
    target: the CPU its options name and LLVM's optimization level (3 by default)."""
    from .llvm_target import cpu_target

    checked = checked_target(target)
    return {"target": cpu_target(checked), "opt_level": checked.attrs.get("opt-level", 3)}
