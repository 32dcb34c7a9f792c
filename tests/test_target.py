"""``tvms.target.Target``: TVM's string and dict forms, the H100 defaults of ``cuda``, tags,
the current target (nested, per thread) and clear errors for what it cannot read."""

from __future__ import annotations

import subprocess
import sys
import threading

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
