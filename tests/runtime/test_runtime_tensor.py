"""Tensors, devices and the global function registry (runtime/ndarray.py, device.py,
registry.py), through TVM's names: tvms.nd.array, tvms.runtime.tensor, tvms.cpu, ..."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.runtime import ndarray as nd_mod
from tvmscript.runtime.devices import Device


# ----------------------------------------------------------------------------- devices


def test_cpu_device_names():
    dev = tvms.cpu()
    assert dev == tvms.cpu(0) == tvms.device("cpu", 0) == tvms.device("cpu") == tvms.device("llvm")
    assert dev == tvms.device("cpu:0") == tvms.device(1, 0) == tvms.runtime.device("cpu", 0)
    assert str(dev) == "cpu:0"
    assert repr(dev) == "device(type='cpu', index=0)"
    assert dev.type == "cpu" and dev.index == 0 and dev.device_id == 0
    assert dev.dlpack_device_type() == 1 and dev.exist
    assert hash(dev) == hash(Device(1, 0))
    assert tvms.cpu(1) != dev


def test_cuda_device_names():
    dev = tvms.cuda(1)
    assert str(dev) == "cuda:1" and dev == tvms.device("cuda:1") == tvms.device("gpu", 1)
    assert dev.dlpack_device_type() == 2
    with pytest.raises(NotImplementedError, match="only on the CPU and on CUDA GPUs"):
        tvms.nd.array(np.zeros(3), device=tvms.device("opencl"))
    with pytest.raises(ValueError, match="compiled for the CPU"):
        tvms.relax.VirtualMachine(tvms.compile(tvms.ir.IRModule()), dev)


@pytest.mark.parametrize("bad", ["tpu", "cuda:x", ""])
def test_unknown_device_names(bad):
    with pytest.raises(ValueError):
        tvms.device(bad)


def test_bad_device_index():
    with pytest.raises(ValueError, match="non-negative"):
        tvms.cpu(-1)


# ----------------------------------------------------------------------------- tensors


def test_nd_array_copies_and_describes_itself():
    src = np.arange(6, dtype="float32").reshape(2, 3)
    t = tvms.nd.array(src)
    src[0, 0] = 100.0  # the tensor owns a copy, as TVM's does
    assert t.numpy()[0, 0] == 0.0
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.dtype == "float32" and t.ndim == 2 and t.numel() == 6 and t.size() == 6
    assert t.device == tvms.cpu(0)
    assert t.strides == (3, 1) and t.is_contiguous()
    assert isinstance(t, tvms.nd.NDArray) and isinstance(t, tvms.runtime.Tensor)
    assert str(t) == str(np.arange(6, dtype="float32").reshape(2, 3))
    assert repr(t).startswith("<tvms.runtime.Tensor shape=(2, 3), cpu:0>")


def test_runtime_tensor_is_the_new_name():
    t = tvms.runtime.tensor(np.ones((4,), "int32"), tvms.cpu())
    assert t.dtype == "int32" and t.shape == (4,)
    np.testing.assert_array_equal(t.numpy(), np.ones(4, "int32"))


def test_nd_array_from_lists_tensors_and_dtype():
    assert tvms.nd.array([1, 2, 3]).dtype == "int64"
    assert tvms.nd.array([1.0, 2.0], dtype="float16").dtype == "float16"
    a = tvms.nd.array([[1, 2], [3, 4]], device=tvms.cpu(), dtype="float32")
    b = tvms.nd.array(a)
    b.numpy()[0, 0] = 9
    assert a.numpy()[0, 0] == 1  # a copy
    with pytest.raises(TypeError, match="Python objects"):
        tvms.nd.array([object()])


def test_nd_array_of_non_contiguous_input_is_compact():
    src = np.arange(12, dtype="float64").reshape(3, 4)[:, ::2]
    t = tvms.nd.array(src)
    np.testing.assert_array_equal(t.numpy(), src)
    assert t.numpy().flags.c_contiguous


def test_numpy_is_zero_copy():
    t = tvms.nd.array(np.zeros((2, 2), "float32"))
    view = t.numpy()
    view[1, 1] = 5.0
    assert t.numpy()[1, 1] == 5.0
    assert np.shares_memory(view, t.numpy())
    assert view.ctypes.data == t.data_ptr()


def test_data_ptr_matches_numpy():
    arr = np.arange(10, dtype="int8")[3:]
    assert nd_mod.data_ptr(arr) == arr.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"])
def test_dtypes(dtype):
    t = tvms.nd.empty((3,), dtype)
    assert t.dtype == dtype and t.numpy().dtype == np.dtype(dtype)


def test_empty_is_aligned():
    for shape in [(1,), (3, 5), (0,), (7, 1, 3)]:
        t = tvms.runtime.empty(shape, "float32")
        assert t.shape == shape
        assert t.data_ptr() % nd_mod.ALIGNMENT == 0 or t.numel() == 0
    assert tvms.nd.array(np.ones(5)).data_ptr() % nd_mod.ALIGNMENT == 0


def test_unknown_dtype():
    with pytest.raises(TypeError, match="unknown dtype"):
        tvms.nd.empty((2,), "float33")


def test_copyfrom_and_copyto():
    t = tvms.nd.empty((2, 3), "float32")
    assert t.copyfrom(np.ones((2, 3), "float64")) is t
    np.testing.assert_array_equal(t.numpy(), np.ones((2, 3), "float32"))
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        t.copyfrom(np.zeros((3, 3), "float32"))
    u = t.copyto(tvms.cpu())
    assert u is not t and np.array_equal(u.numpy(), t.numpy()) and not np.shares_memory(u.numpy(), t.numpy())
    w = tvms.nd.empty((2, 3), "float32")
    assert t.copyto(w) is w
    np.testing.assert_array_equal(w.numpy(), t.numpy())
    with pytest.raises(TypeError):
        t.copyto(3)


def test_dlpack_export_shares_memory():
    t = tvms.nd.array(np.arange(4, dtype="float32"))
    assert t.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(t)
    view[0] = 42.0
    assert t.numpy()[0] == 42.0


def test_from_dlpack_shares_memory():
    src = np.arange(4, dtype="int32")
    t = tvms.nd.from_dlpack(src)
    t.numpy()[1] = 7
    assert src[1] == 7
    with pytest.raises(ValueError, match="contiguous"):
        tvms.nd.from_dlpack(np.arange(8)[::2])


def test_array_protocol():
    t = tvms.nd.array(np.arange(3, dtype="float32"))
    assert np.asarray(t).dtype == np.float32
    assert np.shares_memory(np.asarray(t), t.numpy())
    assert np.asarray(t, dtype="float64").dtype == np.float64
    assert len(t) == 3


def test_pickle_round_trip():
    t = tvms.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    u = pickle.loads(pickle.dumps(t))
    assert u.shape == t.shape and u.dtype == t.dtype
    np.testing.assert_array_equal(u.numpy(), t.numpy())


# ----------------------------------------------------------------------------- registry


def test_register_and_get_global_func():
    @tvms.register_func("test_runtime.add_one", override=True)
    def add_one(x):
        return x + 1

    assert add_one(1) == 2  # the decorator returns the function itself
    assert tvms.get_global_func("test_runtime.add_one") is add_one
    with pytest.raises(ValueError, match="already registered"):
        tvms.register_func("test_runtime.add_one", lambda x: x)
    tvms.register_func("test_runtime.add_one", lambda x: x + 2, override=True)
    assert tvms.get_global_func("test_runtime.add_one")(1) == 3


def test_register_func_by_function_name():
    from tvmscript.runtime import registry

    def test_runtime_named_func():
        return "ok"

    tvms.register_func(test_runtime_named_func, override=True)
    assert tvms.get_global_func("test_runtime_named_func")() == "ok"
    assert "test_runtime_named_func" in registry.list_global_func_names()
    registry.remove_global_func("test_runtime_named_func")
    assert tvms.get_global_func("test_runtime_named_func", allow_missing=True) is None


def test_get_missing_global_func():
    with pytest.raises(ValueError, match="no global function named 'test_runtime.nope'"):
        tvms.get_global_func("test_runtime.nope")


def test_register_func_rejects_bad_names():
    with pytest.raises(TypeError):
        tvms.register_func("", lambda: None)
    with pytest.raises(TypeError):
        tvms.register_func("test_runtime.not_callable", 3)
