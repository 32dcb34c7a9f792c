"""``tvms.target.Target``: TVM's string and dict forms, the H100 defaults of ``cuda``, tags,
the current target (nested, per thread) and clear errors for what it cannot read."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.target import Target


def test_cuda_defaults_describe_an_h100():
    t = Target("cuda")
    assert t.kind.name == "cuda" and t.keys == ("cuda", "gpu")
    assert t.arch == "sm_90"
    assert t.max_threads_per_block == 1024 and t.max_num_threads == 1024
    assert t.thread_warp_size == 32
    assert t.max_shared_memory_per_block == 49152
    assert t.attrs["arch"] == "sm_90" and isinstance(t.attrs, dict)
    assert str(t) == ("cuda -keys=cuda,gpu -arch=sm_90 -max_num_threads=1024 -max_shared_memory_per_block=49152 "
                      "-max_threads_per_block=1024 -registers_per_block=65536 -thread_warp_size=32")


def test_options_override_the_defaults():
    assert Target("cuda -arch=sm_80").arch == "sm_80"
    t = Target("cuda -max_threads_per_block=512 -max_shared_memory_per_block=98304")
    assert t.max_threads_per_block == 512 and t.max_shared_memory_per_block == 98304
    assert t.max_num_threads == 1024  # an attribute of its own, as in TVM
    t = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma -num-cores=4")
    assert (t.kind.name, t.mcpu, t.mattr, t.attrs["num-cores"]) == ("llvm", "skylake-avx512", ["+avx512f", "+fma"], 4)
    assert t.keys == ("cpu",) and t.arch == "" and t.max_threads_per_block is None
    assert str(t) == "llvm -keys=cpu -mattr=+avx512f,+fma -mcpu=skylake-avx512 -num-cores=4"
    assert Target("llvm -system-lib").attrs["system-lib"] is True  # a bare flag is a true boolean
    assert Target("llvm -system-lib=0").attrs["system-lib"] is False


def test_dict_form_and_round_trips():
    t = Target({"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024, "libs": ["cublas"]})
    assert t.arch == "sm_80" and t.libs == ["cublas"]
    assert Target(str(t)) == t
    assert Target(t.export()) == t
    assert Target(t) == t and Target(t) is not t
    assert Target("cuda") != Target("cuda -arch=sm_80")
    assert len({Target("cuda"), Target("cuda")}) == 1


def test_host():
    t = Target("cuda", host="llvm")
    assert t.host == Target("llvm") and t.export()["host"]["kind"] == "llvm"
    assert Target("cuda").with_host({"kind": "llvm", "mcpu": "znver4"}).host.mcpu == "znver4"
    assert Target("cuda").host is None


def test_tags():
    t = Target("nvidia/nvidia-h100")
    assert (t.kind.name, t.arch, t.tag, t.attrs["l2_cache_size_bytes"]) == ("cuda", "sm_90a", "nvidia/nvidia-h100", 52428800)
    assert Target("nvidia/nvidia-a100").arch == "sm_80"
    assert Target("nvidia/nvidia-a100 -max_threads_per_block=256").max_threads_per_block == 256
    assert Target({"tag": "nvidia/nvidia-a100"}) == Target("nvidia/nvidia-a100")
    assert "nvidia/nvidia-h100" in tvms.target.list_tags()


def test_other_kinds():
    assert Target("rocm").thread_warp_size == 64
    assert Target("metal").max_threads_per_block == 256
    assert Target("nvptx").arch == "sm_90"
    assert tvms.target.cuda(arch="sm_86").arch == "sm_86"
    assert "cuda" in Target.list_kinds() and "llvm" in Target.list_kinds()


@pytest.mark.parametrize("text, message", [
    ("foo", "unknown target kind 'foo'; expected one of"),
    ("", "an empty string is not a target"),
    ("cuda arch=sm_80", "cannot read option 'arch=sm_80'; options are written -name=value"),
    ("cuda -max_threads_per_block=abc", "-max_threads_per_block must be an integer, not 'abc'"),
    ("cuda -max_threads_per_block=0", "max_threads_per_block must be positive"),
    ("cuda -arch", "arch needs a value"),
    ("cuda -arch=80", "arch must be a CUDA architecture such as sm_80"),
    ("cuda -mcpu=x -mcpu=y", "option -mcpu is given twice"),
    ("cuda -warp=32", "target kind 'cuda' has no attribute 'warp'; it takes"),
    ("llvm -arch=sm_80", "target kind 'llvm' has no attribute 'arch'"),
    ("cuda -arch='sm_80", "No closing quotation"),
    ("-arch=sm_80", "the target kind comes first"),
    ("nvidia/nvidia-h1000", "unknown tag 'nvidia/nvidia-h1000'"),
    ("llvm -system-lib=maybe", "system-lib must be a boolean"),
])
def test_errors(text, message):
    with pytest.raises(ValueError) as info:
        Target(text)
    assert message in str(info.value)


def test_dict_errors():
    with pytest.raises(ValueError, match="a target dict needs a 'kind'"):
        Target({"arch": "sm_80"})
    with pytest.raises(ValueError, match="max_threads_per_block must be an integer, not 5.5"):
        Target({"kind": "cuda", "max_threads_per_block": 5.5})
    assert Target({"kind": "cuda", "max_threads_per_block": "512"}).max_threads_per_block == 512
    with pytest.raises(ValueError, match="a target is a string"):
        Target(42)


def test_current_target_nests_and_is_per_thread():
    assert Target.current() is None
    assert Target.current(allow_none=True) is None
    with pytest.raises(ValueError, match="no target is set"):
        Target.current(allow_none=False)
    seen = []
    with Target("cuda") as outer:
        assert Target.current() is outer
        with Target("llvm") as inner:
            assert Target.current() is inner
            worker = threading.Thread(target=lambda: seen.append(Target.current()))
            worker.start()
            worker.join()
        assert Target.current() is outer
    assert Target.current() is None
    assert seen == [None]  # another thread has its own stack


def test_compile_accepts_a_target_object():
    import numpy as np

    func = tvms.parse('''
@T.prim_func
def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi] + T.float32(1)
''')
    ex = tvms.compile(func, target=Target("llvm"))
    a = np.arange(4, dtype="float32")
    b = np.zeros(4, "float32")
    ex["add"](a, b)
    np.testing.assert_array_equal(b, a + 1)
    ex = tvms.compile(func, target=Target("cuda -arch=sm_80"))  # no GPU needed to compile
    assert ex.target == "cuda" and ex.cuda_code.arch == "sm_80"


def test_served_lazily():
    code = ("import sys, tvmscript as tvms\n"
            "assert 'tvmscript.target' not in sys.modules\n"
            "t = tvms.target.Target('cuda')\n"
            "assert tvms.target.Target is t.__class__\n"
            "assert 'numpy' not in sys.modules and 'llvmlite' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- compiling with a target's options
#
# Every option a target is compiled with is one tvms acts on: an unknown CPU or feature, or an
# option tvms would ignore, is an error saying what would be right (issue 25).

ADD_ONE = '''
@T.prim_func
def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)
'''

x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 CPU and feature names")


def _host_cpu() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name()


def _other_cpu() -> str:
    """A CPU LLVM knows that is not this machine's."""
    from tvmscript.compiler.llvm_target import llvm_cpus

    return next(c for c in ("x86-64-v2", "x86-64", "skylake", "znver4") if c in llvm_cpus() and c != _host_cpu())


def _asm(target: str) -> str:
    ex = tvms.compile(tvms.parse(ADD_ONE), target=target)
    return ex.kernels["add_one"].module.get_source("asm")


def test_an_unknown_cpu_names_this_one_and_known_ones():
    with pytest.raises(ValueError) as info:
        tvms.compile(tvms.parse(ADD_ONE), target="llvm -mcpu=bogus")
    message = str(info.value)
    assert "-mcpu=bogus is not a CPU LLVM knows" in message
    assert f"this machine's is {_host_cpu()} (leave -mcpu out to compile for it)" in message
    assert "in all)" in message


@x86_only
def test_an_unknown_cpu_or_feature_suggests_the_nearest():
    with pytest.raises(ValueError, match="others are skylake-avx512"):
        tvms.compile(tvms.parse(ADD_ONE), target="llvm -mcpu=skylake-avx51")
    with pytest.raises(ValueError, match=r"'avx512fp1' is not a feature LLVM knows for x86_64; did you mean \+avx512fp16"):
        tvms.compile(tvms.parse(ADD_ONE), target="llvm -mattr=+avx512fp1")
    with pytest.raises(ValueError, match=r"'bogus' is not a feature LLVM knows for x86_64; this CPU \(.*\) has \+"):
        tvms.compile(tvms.parse(ADD_ONE), target={"kind": "llvm", "mattr": ["+bogus"]})


@pytest.mark.parametrize("target, message", [
    ("llvm -foo=1", "target kind 'llvm' has no attribute 'foo'; the options tvms compiles 'llvm' with are -mcpu, -mattr, -mtriple, -opt-level"),
    ("llvm -mattr=avx2", "write each feature with + to enable it or - to disable it"),  # LLVM would abort
    ("llvm -num-cores=4", "tvms does not act on -num-cores (parallel loops run on OMP_NUM_THREADS threads"),
    ("llvm -fast-math", "tvms does not act on -fast-math"),
    ("llvm -libs=mkl", "tvms does not act on -libs"),
    ("llvm -opt-level=4", "-opt-level=4: LLVM's optimization levels are 0 to 3"),
    ("llvm -mtriple=riscv64-unknown-linux-gnu", "tvms generates CPU code for this machine"),
    ("c -march=armv8", "tvms does not act on -march"),
    ("cuda -mcpu=sm_80", "a CUDA GPU's architecture is -arch, such as -arch=sm_80"),
    ("cuda -libs=cublas", "tvms does not act on -libs"),
    ("cuda -thread_warp_size=64", "NVIDIA GPUs run warps of 32 threads"),
])
def test_options_tvms_would_ignore_are_errors(target, message):
    with pytest.raises(ValueError) as info:
        tvms.compile(tvms.parse(ADD_ONE), target=target)
    assert message in str(info.value)


@x86_only
def test_a_cpu_llvm_cannot_compile_for_is_an_error_not_an_abort():
    # LLVM aborts the process on a 32-bit CPU for a 64-bit triple: the check runs in a child.
    with pytest.raises(ValueError, match="-mcpu=i686: LLVM cannot generate .* code for it .*64-bit"):
        tvms.compile(tvms.parse(ADD_ONE), target="llvm -mcpu=i686")
    with pytest.raises(ValueError, match="-mattr=-64bit: LLVM cannot generate"):
        tvms.compile(tvms.parse(ADD_ONE), target="llvm -mattr=-64bit")


@x86_only
def test_mcpu_and_mattr_take_effect():
    assert not re.search(r"%[yz]mm", _asm("llvm -mcpu=x86-64"))  # SSE2 only
    assert re.search(r"%ymm", _asm("llvm -mcpu=haswell")) and not re.search(r"%zmm", _asm("llvm -mcpu=haswell"))
    assert not re.search(r"%zmm", _asm("llvm -mattr=-avx512f"))
    assert _asm(f"llvm -mcpu={_host_cpu()}") == _asm("llvm")  # naming this CPU is the default


def test_accepted_options_compile_and_run_right():
    a = np.arange(64, dtype="float32")
    for target in ("llvm -opt-level=0", "llvm -opt-level=1 -keys=cpu -model=test", f"llvm -mcpu={_host_cpu()}",
                   "llvm -mattr=-avx512f", Target("llvm -opt-level=2"), "c"):
        b = np.zeros(64, "float32")
        tvms.compile(tvms.parse(ADD_ONE), target=target)["add_one"](a, b)
        np.testing.assert_array_equal(b, a + 1)


@x86_only
def test_code_for_another_cpu_is_printed_and_exported_but_not_run_here(tmp_path):
    from tvmscript.runtime.library import LibraryError

    other = _other_cpu()
    ex = tvms.compile(tvms.parse(ADD_ONE), target=f"llvm -mcpu={other}")
    assert ".globl" in ex.kernels["add_one"].module.get_source("asm")
    with pytest.raises(RuntimeError, match=f"the code is for -mcpu={other}, and this machine's CPU is a {_host_cpu()}"):
        ex["add_one"]
    with pytest.raises(RuntimeError, match="cannot run here"):
        tvms.relax.VirtualMachine(ex, tvms.cpu())
    path = ex.export_library(tmp_path / "other.so")
    with pytest.raises(LibraryError, match=f"cannot run here: the code is for -mcpu={other}"):
        tvms.runtime.load_module(path)


def test_a_target_without_cpu_options_never_asks_llvm(monkeypatch):
    """The default path costs nothing: no child process, no LLVM tables."""
    from tvmscript.compiler import llvm_target

    def refuse(*args):
        raise AssertionError("asked LLVM about a target without -mcpu/-mattr")

    monkeypatch.setattr(llvm_target, "_ask_child", refuse)
    llvm_target._child_result.cache_clear()
    monkeypatch.setenv("TVMS_CACHE_DIR", "/nonexistent/tvms-cache")
    for target in ("llvm", None, Target("llvm"), {"kind": "llvm"}, "llvm -opt-level=2"):
        tvms.compile(tvms.parse(ADD_ONE), target=target)
