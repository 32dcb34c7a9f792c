"""The builder and the runner on a Dask cluster: `DaskBuilder` and `DaskRunner`, the interfaces
of `builder.LocalBuilder` and `runner.LocalRunner`, each candidate one Dask task.

Why Dask: candidates measured on several machines (or GPUs) at once, by a scheduler that
restarts workers that die and moves their tasks elsewhere. Dask is an optional dependency
(``pip install tvms[distributed]``), imported here only.

How a candidate runs: the task hands it to a `LocalBuilder` / `LocalRunner` the Dask worker
keeps (one per worker thread, started by its first task): the candidate is compiled, or
loaded and timed, in a subprocess of the Dask worker, with the same timeouts, checks and
error kinds as locally. A kernel that crashes kills that subprocess (``"crash"``), never the
Dask worker. Each measuring task asks for the worker resource ``{"device": 1}`` (by default),
which each worker has one of, so that no worker times two kernels at once; start workers
with ``--resources device=1`` (`local_cluster` does).

A Dask worker that dies mid-run (killed, out of memory, its machine gone) loses only the
candidates it was running: the scheduler *resubmits* them to another worker, up to
``distributed.scheduler.allowed-failures`` times (3 by default), then reports them as
``"crash"`` (KilledWorker). Resubmitting is right here because a kernel cannot kill the Dask
worker (it runs in the worker's subprocess): the death is the machine's, not the candidate's,
and its time on a healthy worker is as good as any. The other workers' candidates go on.

Results stream back as tasks complete (`DaskRunner.run_iter`, through ``as_completed``);
`run` returns them in input order. The arguments and expected outputs a batch's candidates
share travel to the cluster once (``scatter``, to every worker), not once per task; from the
Dask worker to its measuring subprocess they go with each task (a pipe, ~1 ms a MB).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Iterator, Optional

from .measure import BuildResult, RunnerResult

__all__ = ["DaskBuilder", "DaskRunner", "local_cluster"]

DEVICE_RESOURCE = {"device": 1}


def local_cluster(n_workers: int = 1, **kwargs):
    """A `distributed.LocalCluster` for tuning on this machine: one thread per worker, worker
    processes, and the ``device`` resource each worker has one of. Its scheduler's HTTP
    server takes a free port (not 8787, which two clusters on one machine would share).

    The environment Dask gives its workers (``distributed.nanny.pre-spawn-environ``:
    ``OMP_NUM_THREADS=1`` and others) is set in each worker process, not in ours: Dask's
    nanny writes it into the parent's ``os.environ`` before it starts a worker, and this
    process's kernels, whose default schedule and thread team follow ``OMP_NUM_THREADS``,
    then ran on one thread for the rest of the process (a test after the Dask tests got a
    schedule for one thread)."""
    import dask
    from distributed import LocalCluster

    worker_env = {str(k): str(v) for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ") or {}).items()
                  if v is not None}
    options = dict(n_workers=n_workers, threads_per_worker=1, processes=True, resources=dict(DEVICE_RESOURCE),
                   dashboard_address=":0", env=worker_env)
    options.update(kwargs)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": {}}):   # (read by each nanny when it is made)
        return LocalCluster(**options)


class _Connection:
    """A `distributed.Client` to ``scheduler``: None (a `local_cluster` of ``n_workers`` of
    our own, closed with us), a scheduler's address, a cluster, or a Client to use as is."""

    def __init__(self, scheduler, n_workers: int) -> None:
        from distributed import Client

        self._cluster = None
        self._own_client = not isinstance(scheduler, Client)
        if scheduler is None:
            self._cluster = local_cluster(n_workers)
            self.client = Client(self._cluster)
        elif isinstance(scheduler, Client):
            self.client = scheduler
        else:
            self.client = Client(scheduler)

    def close(self) -> None:
        if self._own_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()


# ----------------------------------------------------------------------------- on the Dask worker

# Each worker thread's LocalBuilder and LocalRunner (a worker runs its tasks on its threads:
# with several, one process each keeps the candidates apart); all of them, for `_close_all`,
# which runs on another thread (the worker's event loop).
_local = threading.local()
_opened: list = []
_opened_lock = threading.Lock()


def _replace(name: str, worker):
    """Make ``worker`` this thread's ``name`` (closing the one it replaces)."""
    old = getattr(_local, name, None)
    with _opened_lock:
        if old is not None:
            _opened.remove(old)
        _opened.append(worker)
    if old is not None:
        old.close()
    setattr(_local, name, worker)
    return worker


def _build_task(inp, bounds_check: bool, timeout_s: float) -> BuildResult:
    from .builder import LocalBuilder

    builder = getattr(_local, "builder", None)
    if builder is None or builder.bounds_check != bounds_check or builder.timeout_s != timeout_s:
        builder = _replace("builder", LocalBuilder(max_workers=1, timeout_s=timeout_s, bounds_check=bounds_check))
    return builder.build([inp])[0]


def _run_task(inp, args, expected, timeout_s: Optional[float]) -> RunnerResult:
    from .runner import LocalRunner

    runner = getattr(_local, "runner", None)
    if runner is None or runner.timeout_s != timeout_s:
        runner = _replace("runner", LocalRunner(timeout_s=timeout_s))
    return runner.run([replace(inp, args=args, expected=expected)])[0]


def _reference_task(inp, args, outputs, timeout_s: float) -> dict:
    """The default schedule's outputs, computed by this worker's measuring process."""
    from .runner import LocalRunner

    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _replace("runner", LocalRunner())
    return runner.reference(inp, args, outputs, timeout_s)


def _close_all() -> None:
    """Stop the compiling and measuring processes this Dask worker started (a later task
    starts its thread's again)."""
    with _opened_lock:
        workers = list(_opened)
    for worker in workers:
        worker.close()


# ----------------------------------------------------------------------------- the client's side


def _results(client, futures: list, failed, deadline_s: Optional[float] = None) -> Iterator[tuple]:
    """(input index, result) as the tasks finish; ``failed(exception)`` makes the result of a
    task that raised (a KilledWorker after repeated worker deaths, a lost scheduler), and of
    the tasks still unfinished ``deadline_s`` seconds after the first was awaited (cancelled:
    a cluster that stopped answering must not hang the tuning run)."""
    from distributed import wait

    index = {f.key: i for i, f in enumerate(futures)}
    pending = set(futures)
    end = None if deadline_s is None else time.monotonic() + deadline_s
    while pending:
        left = None if end is None else max(0.0, end - time.monotonic())
        try:
            done, pending = wait(list(pending), timeout=left, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        if not done:
            for f in pending:
                f.cancel()
                yield index[f.key], failed(TimeoutError(f"no result from the cluster within {deadline_s:g} s"))
            return
        for f in done:
            value = f.exception() if f.status == "error" else f.result()
            yield index[f.key], (failed(value) if isinstance(value, BaseException) else value)


def _stop_remote(client) -> None:
    """`_close_all` on every worker of ``client``'s cluster."""
    try:
        client.run(_close_all)
    except Exception:  # noqa: BLE001 - a cluster already gone has nothing to stop
        pass


def _short(err: BaseException) -> str:
    from .runner import short_error

    return short_error(err)


def _in_order(results: Iterator[tuple], n: int) -> list:
    """The results of ``(input index, result)`` pairs, in input order."""
    out: list = [None] * n
    for i, result in results:
        out[i] = result
    return out


class _OnCluster:
    """What `DaskBuilder` and `DaskRunner` share: the connection to the cluster, and closing it
    (the workers' processes stopped first; the cluster too when it is ours)."""

    def __init__(self, scheduler, n_workers: int) -> None:
        self._conn = _Connection(scheduler, n_workers)

    @property
    def client(self):
        return self._conn.client

    def close(self) -> None:
        _stop_remote(self.client)
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DaskBuilder(_OnCluster):
    """`LocalBuilder`'s interface on a Dask cluster (see the module docstring): each input a
    task, compiled in a subprocess of the worker that takes it, with ``timeout_s`` each.
    ``resources``: what each build task asks of its worker (none by default).
    ``batch_timeout_s``: builds not back that long after a batch was awaited are cancelled and
    reported failed (a cluster that stopped answering does not hang the tuning run)."""

    def __init__(self, scheduler=None, timeout_s: float = 30.0, bounds_check: bool = True, n_workers: int = 1,
                 resources: Optional[dict] = None, batch_timeout_s: Optional[float] = 600.0) -> None:
        super().__init__(scheduler, n_workers)
        self.timeout_s, self.batch_timeout_s = timeout_s, batch_timeout_s
        self.bounds_check = bounds_check
        self.resources = resources

    def build_iter(self, inputs: list) -> Iterator[tuple]:
        """(input index, `BuildResult`) as each build finishes."""
        futures = [self.client.submit(_build_task, inp, self.bounds_check, self.timeout_s, pure=False,
                                      resources=self.resources) for inp in inputs]
        yield from _results(self.client, futures,
                            lambda err: BuildResult(error=f"the build task failed on the cluster: {_short(err)}"),
                            self.batch_timeout_s)

    def build(self, inputs: list) -> list:
        """One `BuildResult` per input, in order."""
        inputs = list(inputs)
        return _in_order(self.build_iter(inputs), len(inputs))


class DaskRunner(_OnCluster):
    """`LocalRunner`'s interface on a Dask cluster (see the module docstring): each input a
    task asking for ``resources`` (``{"device": 1}``: one candidate at a time per worker),
    timed in a subprocess of its worker with ``timeout_s`` (None: each input's own).
    ``batch_timeout_s``: candidates not back that long after a batch was awaited are cancelled
    and reported as ``"crash"``."""

    def __init__(self, scheduler=None, timeout_s: Optional[float] = None, n_workers: int = 1,
                 resources: Optional[dict] = DEVICE_RESOURCE, batch_timeout_s: Optional[float] = 600.0) -> None:
        super().__init__(scheduler, n_workers)
        self.timeout_s, self.batch_timeout_s = timeout_s, batch_timeout_s
        self.resources = dict(resources) if resources else None

    def run_iter(self, inputs: list) -> Iterator[tuple]:
        """(input index, `RunnerResult`) as each candidate's measurement finishes."""
        inputs = list(inputs)
        done = {i: RunnerResult(error="nothing to run: the candidate did not build", error_kind="build")
                for i, inp in enumerate(inputs) if inp.artifact is None}
        yield from done.items()
        todo = [i for i in range(len(inputs)) if i not in done]
        scattered = self._scatter([v for i in todo for v in (inputs[i].args, inputs[i].expected)])
        futures = [self.client.submit(_run_task, replace(inputs[i], args=[], expected={}),
                                      scattered[id(inputs[i].args)], scattered[id(inputs[i].expected)],
                                      self.timeout_s, pure=False, resources=self.resources) for i in todo]
        for k, result in _results(self.client, futures, self._lost, self.batch_timeout_s):
            yield todo[k], result

    def run(self, inputs: list) -> list:
        """One `RunnerResult` per input, in order."""
        inputs = list(inputs)
        return _in_order(self.run_iter(inputs), len(inputs))

    def reference(self, inp, args: list, outputs: list, timeout_s: float = 120.0) -> dict:
        """`LocalRunner.reference` on one of the cluster's workers: the expected outputs come
        from the machines (and GPUs) the candidates are measured on, not the tuner's."""
        return self.client.submit(_reference_task, inp, list(args), list(outputs), timeout_s, pure=False,
                                  resources=self.resources).result(timeout=self.batch_timeout_s)

    def _scatter(self, values: list) -> dict:
        """id(value) -> its future on the cluster, each distinct object sent once, to every
        worker: any may measure any candidate, and a copy on one worker alone would be lost
        with it (and the candidates that need it with it)."""
        distinct = list({id(v): v for v in values}.values())
        if not distinct:
            return {}
        return {id(v): f for v, f in zip(distinct, self.client.scatter(distinct, hash=False, broadcast=True))}

    @staticmethod
    def _lost(err: BaseException) -> RunnerResult:
        return RunnerResult(error=f"the candidate's Dask workers died while measuring it: {_short(err)}",
                            error_kind="crash")

