"""The CUDA target on a GPU: the samples, the seed's GPU section, dynamic shapes, float16 and
the runtime's memory, each against the CPU backend (`pytest -m cuda`; skipped, with the
reason, on a machine without a GPU or without pycuda)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir

from test_cuda_codegen import ELEMENTWISE_DYN, FP16, MATMUL, ROW_SUM, VECTORIZED, BIG_TILE

pytestmark = pytest.mark.cuda

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def cpu_and_gpu(mod, args):
    """``main`` of ``mod`` (legalized here when needed) on the CPU and on GPU 0: two NumPy results."""
    mod = tvms.relax.transform.LegalizeOps()(mod)  # nothing to do for a lowered module
    cpu = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["main"](*args)
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
    gpu = vm["main"](*[tvms.nd.array(a, dev) for a in args])
    return _numpy(cpu), _numpy(gpu)


def _numpy(v):
    if isinstance(v, (list, tuple)):
        return [_numpy(x) for x in v]
    return v.numpy()


def run_prim_both(src: str, name: str, arrays: list):
    """A prim_func destination-passing style on the CPU and on the GPU: the written arrays."""
    mod = tvms.parse(src)
    cpu = [a.copy() for a in arrays]
    tvms.compile(mod, target="llvm")[name](*cpu)
    dev = tvms.cuda(0)
    gpu = [tvms.nd.array(a, dev) for a in arrays]
    tvms.compile(mod, target="cuda")[name](*gpu)
    return cpu, [g.numpy() for g in gpu]


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.tvms"))


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_every_sample_on_the_gpu_matches_the_cpu(name):
    from tvmscript.diagnostics import TVMScriptError

    try:
        mod = tvms.load(str(SAMPLES / name))
    except TVMScriptError as err:
        pytest.skip(f"{name} is not a whole program: {err.message}")
    if not isinstance(mod, tvms.ir.IRModule) or "main" not in mod or not isinstance(mod["main"], tvms.relax.Function):
        pytest.skip(f"{name} has no Relax main to run")
    if "R.call_dps_packed" in mod.script() or "R.call_packed" in mod.script():
        pytest.skip(f"{name} calls host functions")
    rng = np.random.default_rng(0)
    args = []
    for p in mod["main"].params:
        shape = [int(d.value) if isinstance(d, tir.IntImm) else 8 for d in p.struct_info.shape]
        args.append(rng.standard_normal(shape).astype(p.struct_info.dtype))
    cpu, gpu = cpu_and_gpu(mod, args)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4)


def test_seed_000_gpu_section():
    """Seed 000's "deploy to GPU": DLight schedules, then the same results as on the CPU."""
    from tvmscript import dlight as dl

    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    with tvms.target.Target("cuda"):
        gpu_mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.Fallback())(mod)
    rng = np.random.default_rng(1)
    raw_data = rng.random((1, 784), dtype=np.float32)
    params = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32")
              for p in mod["main"].params[1:]]
    cpu_out = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["main"](raw_data, *params).numpy()
    exec_ = tvms.compile(gpu_mod, target="cuda")
    dev = tvms.device("cuda", 0)
    vm = tvms.relax.VirtualMachine(exec_, dev)
    data = tvms.runtime.tensor(raw_data, dev)
    gpu_params = [tvms.runtime.tensor(p, dev) for p in params]
    gpu_out = vm["main"](data, *gpu_params).numpy()
    assert np.allclose(cpu_out, gpu_out, atol=1e-3)


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_dynamic_shapes_at_two_sizes(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    cpu, gpu = run_prim_both(ELEMENTWISE_DYN, "add", [a, b, np.zeros(n, np.float32)])
    np.testing.assert_array_equal(gpu[2], cpu[2])


@pytest.mark.parametrize("src, name, shapes, dtype", [
    (MATMUL, "mm", [(512, 512), (512, 512), (512, 512)], "float32"),
    (ROW_SUM, "row_sum", [(128, 4096), (128,)], "float32"),
    (FP16, "gelu_ish", [(4096,), (4096,)], "float16"),
    (VECTORIZED, "scale", [(4096,), (4096,)], "float32"),
    (BIG_TILE, "copy", [(64, 16384), (64, 16384)], "float32"),
])
def test_representative_kernels_match_the_cpu(src, name, shapes, dtype):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    cpu, gpu = run_prim_both(src, name, arrays)
    tol = 2e-2 if dtype == "float16" else 1e-4
    np.testing.assert_allclose(gpu[-1].astype("float32"), cpu[-1].astype("float32"), rtol=tol, atol=tol)


def test_softmax_and_layer_norm_through_the_vm():
    from tvmscript import relax

    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 1000)).astype("float32")
    for make in (lambda v: relax.op.nn.softmax(v, axis=-1), lambda v: relax.op.sum(v, axis=[1])):
        bb = relax.BlockBuilder()
        v = relax.Var("x", relax.TensorStructInfo([64, 1000], "float32"))
        with bb.function("main", [v]):
            with bb.dataflow():
                out = bb.emit_output(make(v))
            bb.emit_func_output(out)
        cpu, gpu = cpu_and_gpu(bb.get(), [x])
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4)


def test_wrong_device_argument_names_the_parameter():
    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), tvms.cuda(0))
    args = [np.zeros([int(d.value) for d in p.struct_info.shape], "float32") for p in mod["main"].params]
    with pytest.raises((TypeError, ValueError), match="'x'"):
        vm["main"](*args)


def test_memory_is_released_after_a_call():
    import tvmscript.runtime.cuda as cuda_rt  # the module (tvms.runtime.cuda is the device function)

    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
    args = [tvms.nd.array(np.ones([int(d.value) for d in p.struct_info.shape], "float32"), dev)
            for p in mod["main"].params]
    vm["main"](*args)  # warm: the arena and the pool hold what one call needs
    before = cuda_rt.memory_stats(dev)["in_use_bytes"]
    out = vm["main"](*args)
    dev.sync()
    after = cuda_rt.memory_stats(dev)["in_use_bytes"]
    assert after - before <= max(out.nbytes, 512), (before, after)
    del out
    assert cuda_rt.memory_stats(dev)["in_use_bytes"] <= before


def test_dlpack_exchange_with_torch():
    torch = pytest.importorskip("torch")
    dev = tvms.cuda(0)
    x = tvms.nd.array(np.arange(12, dtype=np.float32).reshape(3, 4), dev)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.shape == (3, 4)
    t.mul_(2)  # no copy: the tvms tensor sees it
    np.testing.assert_array_equal(x.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    back = tvms.runtime.from_dlpack(torch.ones(5, device="cuda"))
    assert back.device == dev and back.numpy().tolist() == [1.0] * 5


def test_cli_run_on_the_gpu(tmp_path):
    from test_cli import tvms as run_tvms

    mlp = str(SAMPLES / "mlp.tvms")
    gpu = run_tvms("run", mlp, "--target", "cuda", "--repeat", "3", "--out", tmp_path / "gpu.npz")
    assert gpu.returncode == 0, gpu.err
    cpu = run_tvms("run", mlp, "--out", tmp_path / "cpu.npz")
    assert cpu.returncode == 0, cpu.err
    np.testing.assert_allclose(np.load(tmp_path / "gpu.npz")["output"], np.load(tmp_path / "cpu.npz")["output"],
                               rtol=1e-4, atol=1e-4)
