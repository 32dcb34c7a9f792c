"""The builders and runners of auto-tuning (compiler/meta_schedule/builder.py, runner.py,
dask_runner.py): candidates compiled in worker processes and timed in another, each with a
timeout; a candidate that computes something else than the default schedule, raises, hangs
or crashes its process costs that candidate only, and the next one runs."""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import time

import numpy as np
import pytest

import tvmscript as tvms
from support.sampled_schedules import matmul_src
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.meta_schedule.builder import CPUArtifact, CUDAArtifact, LocalBuilder, build_artifact
from tvmscript.compiler.meta_schedule.measure import ArgInfo, BuildInput, RunnerInput
from tvmscript.compiler.meta_schedule.runner import (LocalRunner, WorkerCrashed, WorkerError, WorkerProcess,
                                                     WorkerTimeout, _SharedValues, arg_infos_of, mismatch,
                                                     output_indices, random_args, reference_outputs, time_rounds)
from tvmscript.compiler.schedule import Schedule

MATMUL = matmul_src(64, 64, 64)

# The matmul without its init: it adds to whatever C held (random numbers): wrong.
NO_INIT = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

DOUBLE = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
'''

# The matmul's signature; writes 2**52 bytes below C (then further): unmapped memory, a SIGSEGV
# when nothing checks the index.
OUT_OF_BOUNDS = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[T.int64(0) - T.Cast("int64", vi) * T.int64(17592186044416), 0] = A[vi, 0]
'''

# 10**12 iterations: hours.
HANG = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(T.int64(1000000000000)):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[0] = B[0] + A[vi % T.int64(4)]
'''


def parse(src: str):
    return tvms.parse(src)


def marked(func):
    """``func`` marked as scheduled, as a tuner's candidates are: compiled as it is."""
    return dataclasses.replace(func, attrs={**func.attrs, "tvms.no_default_schedule": True})


def candidate(src: str):
    return marked(parse(src))


def tiled(func, fi: int = 8, fj: int = 16):
    """A hand-scheduled matmul candidate: I and J split, J's inner part vectorized, the outer
    I loop parallel, marked as scheduled."""
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[None, fi])
    j0, j1 = sch.split(j, factors=[None, fj])
    sch.reorder(i0, j0, i1, k, j1)
    sch.vectorize(j1)
    sch.parallel(i0)
    return marked(sch.mod["main"])


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(timeout_s=60) as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    with LocalRunner() as r:
        yield r


@pytest.fixture(scope="module")
def matmul_task(runner):
    """The matmul, its random arguments and the default schedule's outputs."""
    func = parse(MATMUL)
    args = random_args(arg_infos_of(func), seed=0)
    return func, args, reference_outputs(func, "llvm", args, runner)


def run_inputs(artifacts, args, expected, **options) -> list:
    return [RunnerInput(a, "llvm", args, expected, **options) for a in artifacts]


# ----------------------------------------------------------------------------- building and running


def test_a_hand_scheduled_matmul_builds_runs_with_a_time_and_matches_numpy(builder, runner, matmul_task):
    func, args, expected = matmul_task
    np.testing.assert_allclose(expected[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
    built = builder.build([BuildInput(tiled(func), "llvm"), BuildInput(tvms.IRModule({"main": tiled(func, 4, 32)}),
                                                                     "llvm")])
    assert [b.error for b in built] == [None, None]
    assert all(isinstance(b.artifact, CPUArtifact) and b.build_secs > 0 for b in built)
    results = runner.run(run_inputs([b.artifact for b in built], args, expected, repeat=4, min_repeat_ms=5))
    for result in results:
        assert result.ok and result.error is None, result.error
        assert len(result.run_secs) == 4 and all(0 < s < 0.1 for s in result.run_secs)
    # The artifact travelled through pickles and loads here too: it computes the product.
    kernel = pickle.loads(pickle.dumps(built[0].artifact)).load()
    out = np.zeros((64, 64), "float32")
    kernel(args[0], args[1], out)
    np.testing.assert_allclose(out, args[0] @ args[1], rtol=1e-4, atol=1e-4)


def test_the_builder_compiles_a_marked_candidate_as_scheduled_and_anything_else_as_tvms_compile(builder):
    func = parse(MATMUL)  # unscheduled: the default schedule would tile it
    as_is, default = builder.build([BuildInput(marked(func), "llvm"), BuildInput(func, "llvm")])
    assert as_is.artifact.object_code == build_cpu({"main": func}, schedule=False, use_cache=False).object_code
    assert default.artifact.object_code == build_cpu({"main": func}, schedule=True, use_cache=False).object_code
    assert as_is.artifact.object_code != default.artifact.object_code


def test_a_candidate_that_computes_something_else_is_wrong_and_not_timed(builder, runner, matmul_task):
    func, args, expected = matmul_task
    built = builder.build([BuildInput(candidate(NO_INIT), "llvm"), BuildInput(tiled(func), "llvm")])
    wrong, right = runner.run(run_inputs([b.artifact for b in built], args, expected))
    assert wrong.error_kind == "wrong" and wrong.run_secs is None
    assert "parameter 2" in wrong.error and "max abs error" in wrong.error
    assert right.ok, right.error


def test_mismatch_counts_a_nan_only_where_the_reference_has_none():
    want = np.array([1.0, np.nan, 3.0], "float32")
    assert mismatch({0: want.copy()}, {0: want}, 1e-3, 1e-3) is None
    text = mismatch({0: np.array([1.0, np.nan, np.nan], "float32")}, {0: want}, 1e-3, 1e-3)
    assert text is not None and "1 NaN where the reference has none" in text
    text = mismatch({0: np.array([1.0, np.nan, 3.5], "float32")}, {0: want}, 1e-3, 1e-3)
    assert "max abs error 0.5" in text
    assert "shape" in mismatch({0: np.zeros(2)}, {0: want}, 1e-3, 1e-3)


def test_a_build_error_is_contained_in_its_result(builder):
    double = candidate(DOUBLE)
    results = builder.build([BuildInput(double, "cuda"), BuildInput(double, "llvm"), BuildInput(double, "rocm"),
                             BuildInput(tvms.IRModule({"main": double}), "llvm", name="absent")])
    assert "bound to no GPU thread" in results[0].error and results[0].artifact is None
    assert results[1].error is None and isinstance(results[1].artifact, CPUArtifact)
    assert "cannot tune for target 'rocm'" in results[2].error
    assert "no function named 'absent'" in results[3].error


class _ExitWhenUnpickled:
    """A module whose unpickling ends the process receiving it (exit status 3)."""

    def __reduce__(self):
        return os._exit, (3,)


class _SleepWhenUnpickled:
    """A module whose unpickling takes a minute: a build that hangs."""

    def __reduce__(self):
        return time.sleep, (60,)


def test_a_build_that_kills_or_hangs_its_process_costs_that_candidate_only():
    double = parse(DOUBLE)
    with LocalBuilder(max_workers=2, timeout_s=2.0) as local:
        start = time.perf_counter()
        results = local.build([BuildInput(_ExitWhenUnpickled(), "llvm"), BuildInput(double, "llvm"),
                               BuildInput(_SleepWhenUnpickled(), "llvm"), BuildInput(double, "llvm")])
        assert time.perf_counter() - start < 30
    assert "crashed its process" in results[0].error and "exit status 3" in results[0].error
    assert "timeout of 2 s" in results[2].error
    assert results[1].artifact is not None and results[3].artifact is not None


def test_a_kernel_that_crashes_the_worker_is_a_crash_and_the_next_candidate_runs(runner, matmul_task):
    func, args, expected = matmul_task
    with LocalBuilder(max_workers=1, bounds_check=False) as unchecked:
        built = unchecked.build([BuildInput(candidate(OUT_OF_BOUNDS), "llvm"), BuildInput(tiled(func), "llvm")])
    runner.run(run_inputs([built[1].artifact], args, expected))  # the worker is up
    before = runner.worker_pid
    crash, after = runner.run(run_inputs([b.artifact for b in built], args, expected))
    assert crash.error_kind == "crash" and "SIGSEGV" in crash.error and crash.run_secs is None
    assert after.ok, after.error
    assert runner.worker_pid != before


def test_with_bounds_checks_the_same_kernel_raises_instead(builder, runner, matmul_task):
    _, args, expected = matmul_task
    built = builder.build([BuildInput(candidate(OUT_OF_BOUNDS), "llvm")])
    [result] = runner.run(run_inputs([built[0].artifact], args, expected))
    assert result.error_kind == "run" and "BoundsCheckError" in result.error


def test_a_hanging_kernel_times_out_within_its_timeout(builder):
    double = candidate(DOUBLE)
    built = builder.build([BuildInput(candidate(HANG), "llvm"), BuildInput(double, "llvm")])
    args = random_args(arg_infos_of(double), seed=2)
    with LocalRunner(timeout_s=1.0) as local:
        local.run(run_inputs([built[1].artifact], args, {}))  # started: its start-up is not the hang's
        start = time.perf_counter()
        [hung] = local.run(run_inputs([built[0].artifact], args, {}))
        elapsed = time.perf_counter() - start
        [after] = local.run(run_inputs([built[1].artifact], args, {1: args[0] * 2}))
    assert hung.error_kind == "timeout" and "timeout of 1 s" in hung.error
    assert 1.0 <= elapsed < 4.0
    assert after.ok, after.error


def test_a_candidate_without_an_artifact_is_a_build_error(runner):
    [result] = runner.run([RunnerInput(None, "llvm", [], {})])
    assert result.error_kind == "build" and not result.ok


def test_rounds_grow_until_they_last_min_repeat_ms():
    calls = []

    def clock(number):  # 10 us a call, the first one 40 us (cold)
        calls.append(number)
        return 1e-5 * number + (3e-5 if len(calls) == 1 else 0.0)

    secs = time_rounds(clock, number=1, repeat=3, min_repeat_ms=20)
    assert len(secs) == 3 and all(abs(s - 1e-5) < 1e-9 for s in secs)
    assert calls[0] == 1 and all(n * 1e-5 >= 0.02 for n in calls[-3:])
    assert len(calls) <= 5, calls
    assert time_rounds(lambda n: 1.0 * n, number=2, repeat=2, min_repeat_ms=20) == [1.0, 1.0]


def test_a_candidate_far_behind_is_timed_one_round():
    assert time_rounds(lambda n: 0.03 * n, number=1, repeat=3, min_repeat_ms=20, stop_above_s=0.02) == [0.03]
    assert time_rounds(lambda n: 0.03 * n, number=1, repeat=3, min_repeat_ms=20, stop_above_s=0.05) == [0.03] * 3


def test_a_batch_sends_shared_arguments_to_the_worker_once():
    class Worker:
        generation = 1

    shared = _SharedValues(Worker(), iter(range(100)))
    args, expected = [np.zeros(3)], {0: np.zeros(3)}
    puts, a, e = shared.tokens(args, expected)
    assert set(puts) == {a, e} and puts[a] is args
    puts, a2, e2 = shared.tokens(args, expected)
    assert puts == {} and (a2, e2) == (a, e)
    puts, a3, _ = shared.tokens([np.zeros(3)], expected)
    assert list(puts) == [a3] and a3 != a
    Worker.generation = 2  # a new worker process holds nothing: everything is sent again
    puts, a4, e4 = shared.tokens(args, expected)
    assert set(puts) == {a4, e4}


def test_the_worker_process_reports_raises_crashes_and_hangs_and_starts_again():
    worker = WorkerProcess()
    try:
        assert worker.call(pow, 2, 10, timeout=10) == 1024
        first = worker.pid
        with pytest.raises(WorkerError, match="ValueError"):
            worker.call(int, "x", timeout=10)
        assert worker.pid == first
        with pytest.raises(WorkerCrashed, match="exit status 7"):
            worker.call(os._exit, 7, timeout=10)
        with pytest.raises(WorkerCrashed, match="SIGABRT"):
            worker.call(os.abort, timeout=10)
        with pytest.raises(WorkerTimeout):
            worker.call(time.sleep, 30, timeout=0.5)
        assert worker.call(pow, 3, 2, timeout=10) == 9 and worker.pid != first and worker.generation == 4
    finally:
        worker.close()
    assert worker.pid is None


def test_argument_helpers():
    func = parse(MATMUL)
    infos = arg_infos_of(func)
    assert [(i.shape, i.dtype) for i in infos] == [((64, 64), "float32")] * 3
    assert output_indices(func) == [2] and output_indices(parse(DOUBLE)) == [1]
    a, b = random_args(infos, seed=5), random_args(infos, seed=5)
    assert all(np.array_equal(x, y) and x.dtype == np.float32 for x, y in zip(a, b))
    assert not np.array_equal(a[0], random_args(infos, seed=6)[0])
    ints = random_args([ArgInfo((5,), "int8")], seed=0)[0]
    assert ints.dtype == np.int8 and ints.min() >= -8 and ints.max() < 8
    symbolic = tvms.parse('''
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
''')
    with pytest.raises(ValueError, match="symbolic shape"):
        arg_infos_of(symbolic)


def test_reference_outputs_runs_the_default_schedule_in_its_own_worker():
    double = parse(DOUBLE)
    args = random_args(arg_infos_of(double), seed=3)
    assert list(reference_outputs(double, "llvm", args)) == [1]
    np.testing.assert_array_equal(reference_outputs(double, "llvm", args)[1], args[0] * 2)


BOUND_WEIGHT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 256), "float32"), w: R.Tensor((256, 128), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            R.output(y)
        return y
'''


def test_a_weight_the_model_binds_is_measured_packed_as_the_model_runs_it(runner):
    """The model binds ``w``: its kernel, as the build sees it, reads ``w`` packed once
    (layout_free_buffers), and is measured that way: the artifact says how to pack it, the
    runner packs the plain array before the check and the timing."""
    from tvmscript.compiler.meta_schedule.tune import extract_tasks

    w = np.random.default_rng(0).standard_normal((256, 128)).astype("float32")
    mod = tvms.relax.transform.BindParams("main", {"w": tvms.nd.array(w)})(tvms.parse(BOUND_WEIGHT))
    ((_, f, _),) = extract_tasks(mod, "llvm")
    assert list(f.attrs["layout_free_buffers"]) == [1]
    artifact = build_artifact(BuildInput(tvms.IRModule({"main": f}), "llvm"))
    assert [index for index, _ in artifact.packed] == [1]
    args = random_args(arg_infos_of(f), 0)
    expected = reference_outputs(f, "llvm", args, runner=runner)
    np.testing.assert_allclose(expected[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
    (result,) = runner.run([RunnerInput(artifact, "llvm", args, expected)])
    assert result.ok, result.error


def test_throughput_of_small_matmul_candidates(builder, runner, matmul_task, capsys):
    """Build and time 16 matmul candidates (64x64x64), the default 3 rounds of 20 ms each."""
    func, args, expected = matmul_task
    candidates = [tiled(func, fi, fj) for fi in (2, 4, 8, 16) for fj in (4, 8, 16, 32)]
    start = time.perf_counter()
    built = builder.build([BuildInput(c, "llvm") for c in candidates])
    mid = time.perf_counter()
    results = runner.run(run_inputs([b.artifact for b in built], args, expected))
    end = time.perf_counter()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    rate = len(candidates) / (end - start)
    with capsys.disabled():
        print(f"\nthroughput: {rate:.1f} candidates/s ({len(candidates)} matmul 64x64x64 candidates: build "
              f"{mid - start:.2f} s, run {end - mid:.2f} s; best {min(min(r.run_secs) for r in results) * 1e6:.1f} us)")
    assert rate > 1.0


# ----------------------------------------------------------------------------- CUDA


def gpu_matmul(func):
    """The matmul bound to GPU threads: 8x32 outputs a block, one a thread."""
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 32])
    sch.reorder(i0, j0, i1, j1, k)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    return marked(sch.mod["main"])


def test_a_cuda_candidate_is_compiled_with_its_own_thread_binding_not_dlights():
    from tvmscript.compiler import nvrtc

    try:
        nvrtc.nvrtc_version()
    except nvrtc.NVRTCUnavailable as err:
        pytest.skip(f"no NVRTC: {err}")
    artifact = build_artifact(BuildInput(gpu_matmul(parse(MATMUL)), "cuda -arch=sm_80"))
    assert isinstance(artifact, CUDAArtifact) and artifact.code.cubin and artifact.code.arch == "sm_80"
    [launch] = pickle.loads(pickle.dumps(artifact)).code.functions["main"].launches
    assert (launch.grid[0], launch.block[0]) == ("16", "256")
    # Unmarked and bound to no thread: DLight's default schedule, as tvms.compile would.
    default = build_artifact(BuildInput(parse(MATMUL), "cuda -arch=sm_80"))
    assert [(ln.grid, ln.block) for ln in default.code.functions["main"].launches] != [(launch.grid, launch.block)]


@pytest.mark.cuda
def test_a_cuda_candidate_runs_on_the_gpu_and_matches_the_default_schedule(builder, matmul_task):
    func, args, _ = matmul_task
    with LocalRunner() as gpu_runner:
        expected = reference_outputs(func, "cuda", args, gpu_runner)
        np.testing.assert_allclose(expected[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
        built = builder.build([BuildInput(gpu_matmul(func), "cuda"), BuildInput(candidate(NO_INIT), "cuda")])
        assert built[0].error is None, built[0].error
        assert "bound to no GPU thread" in built[1].error
        [result] = gpu_runner.run([RunnerInput(built[0].artifact, "cuda", args, expected)])
    assert result.ok, result.error
    assert all(0 < s < 0.01 for s in result.run_secs)


# ----------------------------------------------------------------------------- Dask


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("distributed")
    from distributed import Client

    from tvmscript.compiler.meta_schedule.dask_runner import local_cluster

    with local_cluster(n_workers=2) as cluster, Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def mixed_batch(matmul_task):
    """Artifacts of a good candidate, a wrong one, one that crashes, another good one."""
    func, args, expected = matmul_task
    with LocalBuilder(max_workers=2, bounds_check=False) as unchecked:
        built = unchecked.build([BuildInput(tiled(func), "llvm"), BuildInput(candidate(NO_INIT), "llvm"),
                                 BuildInput(candidate(OUT_OF_BOUNDS), "llvm"), BuildInput(tiled(func, 4, 32), "llvm")])
    assert all(b.error is None for b in built)
    return [b.artifact for b in built], args, expected


def test_a_local_cluster_sets_its_workers_environment_not_ours(monkeypatch):
    """Dask's nanny writes ``OMP_NUM_THREADS=1`` (and more) into the parent's environment before
    it starts a worker; this process's kernels would then be scheduled for one thread for the
    rest of its life. `local_cluster` gives that environment to the workers only."""
    pytest.importorskip("distributed")
    from distributed import Client

    from tvmscript.compiler.meta_schedule.dask_runner import local_cluster

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with local_cluster(n_workers=1) as cluster, Client(cluster) as client:
        assert list(client.run(lambda: os.environ.get("OMP_NUM_THREADS")).values()) == ["1"]
        client.restart()
        assert os.environ.get("OMP_NUM_THREADS") == "2"


def test_dask_gives_the_results_of_the_local_runner_and_keeps_its_workers(dask_client, runner, mixed_batch):
    from tvmscript.compiler.meta_schedule.dask_runner import DaskBuilder, DaskRunner

    artifacts, args, expected = mixed_batch
    pids = dask_client.run(os.getpid)
    with DaskBuilder(dask_client, batch_timeout_s=60) as dask_builder:
        built = dask_builder.build([BuildInput(candidate(DOUBLE), "llvm"), BuildInput(candidate(DOUBLE), "cuda")])
    assert isinstance(built[0].artifact, CPUArtifact) and "bound to no GPU thread" in built[1].error
    local = runner.run(run_inputs(artifacts, args, expected))
    with DaskRunner(dask_client, batch_timeout_s=60) as dask_runner:
        remote = dask_runner.run(run_inputs(artifacts, args, expected))
    assert [r.error_kind for r in remote] == [r.error_kind for r in local] == [None, "wrong", "crash", None]
    assert "SIGSEGV" in remote[2].error
    assert dask_client.run(os.getpid) == pids  # the crash killed a subprocess of a worker, not the worker


def test_a_dask_worker_killed_mid_run_loses_only_its_candidates_which_are_resubmitted(dask_client, mixed_batch):
    from tvmscript.compiler.meta_schedule.dask_runner import DaskRunner

    artifacts, args, expected = mixed_batch
    good = [artifacts[0], artifacts[3]] * 5
    pids = dask_client.run(os.getpid)
    results, killed = {}, None
    with DaskRunner(dask_client, batch_timeout_s=60) as dask_runner:
        start = time.perf_counter()
        for i, result in dask_runner.run_iter(run_inputs(good, args, expected, min_repeat_ms=60)):
            results[i] = result
            busy = [addr for addr, keys in dask_client.processing().items() if keys]
            if killed is None and busy:
                killed = busy[0]
                os.kill(pids[killed], signal.SIGKILL)
        assert time.perf_counter() - start < 60
    assert killed is not None and pids[killed] not in dask_client.run(os.getpid).values()
    assert sorted(results) == list(range(len(good)))
    assert all(r.ok for r in results.values()), [r.error for r in results.values() if not r.ok]


def test_a_dask_runner_without_a_scheduler_runs_on_a_cluster_of_its_own(mixed_batch):
    pytest.importorskip("distributed")
    from tvmscript.compiler.meta_schedule.dask_runner import DaskRunner

    artifacts, args, expected = mixed_batch
    with DaskRunner(n_workers=1, batch_timeout_s=60) as dask_runner:
        cluster = dask_runner.client.cluster
        good, missing = dask_runner.run([RunnerInput(artifacts[0], "llvm", args, expected),
                                         RunnerInput(None, "llvm", args, expected)])
    assert good.ok, good.error
    assert missing.error_kind == "build"
    assert cluster.status.name == "closed"


def test_a_cluster_that_does_not_answer_in_time_costs_the_batch_not_the_run(dask_client, mixed_batch):
    """Candidates still out when the batch's deadline passes are cancelled and reported, so a
    stuck cluster cannot hang a tuning run."""
    from tvmscript.compiler.meta_schedule.dask_runner import DaskRunner

    artifacts, args, expected = mixed_batch
    slow = run_inputs([artifacts[0]] * 2, args, expected, min_repeat_ms=4000)
    with DaskRunner(dask_client, batch_timeout_s=1.0) as dask_runner:
        start = time.perf_counter()
        results = dask_runner.run(slow)
        assert time.perf_counter() - start < 10
    assert all(r.error_kind == "crash" and "no result from the cluster within 1 s" in r.error for r in results)
