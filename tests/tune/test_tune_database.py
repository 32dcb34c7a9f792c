"""The tuning database and applying it when compiling (compiler/meta_schedule/database.py,
apply.py; tvms.compile(tuning_db=), relax.transform.MetaScheduleApplyDatabase, tvms run/compile
--tuned). Records are made by hand: a matmul's loops split by sampled tiles, reordered,
parallelized and vectorized, committed with a made-up run time. What is checked: the files
round-trip; the fastest measured record wins; what no longer validates (a torn line, a text
that lost its hash, a trace that no longer replays) is dropped or skipped with a warning and
the rest still used; and a compiled module really runs the tuned kernel, with NumPy's results."""

from __future__ import annotations

import dataclasses
import importlib
import json
import warnings

import numpy as np
import pytest
from support.cli import TVMS, load_npz, ok, tvms as run_tvms

import tvmscript as tvms
from tvmscript.compiler.meta_schedule.apply import TUNED_ATTRS, apply_database
from tvmscript.compiler.meta_schedule.database import (TUNING_RECORD_FILE, WORKLOAD_FILE, DatabaseWarning,
                                                       JSONDatabase, TuningRecord, Workload, workload_module)
from tvmscript.compiler.meta_schedule.measure import ArgInfo
from tvmscript.compiler.schedule import Schedule
from tvmscript.compiler.schedule.trace import Trace
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.ir import tir
from tvmscript.ir.structural import structural_equal
from tvmscript.target import Target
from tvmscript.version import __version__

# Two kernels once fused: matmul + add (the one tuned), and a row sum (never tuned: it falls
# back to the default schedule).
SRC = '''\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 32), "float32"), w: R.Tensor((32, 48), "float32"), b: R.Tensor((48,), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, b)
            s = R.sum(z, axis=[1])
            R.output(z, s)
        return (z, s)
'''
TUNED = "fused_matmul_add"


@pytest.fixture(scope="module")
def lowered():
    """The module as the zero pipeline lowers it (the form both the CLI and tvms.compile tune)."""
    return tvms.relax.transform.get_pipeline("zero")(tvms.parse(SRC))


@pytest.fixture(scope="module")
def inputs() -> dict:
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((64, 32)).astype("float32"), "w": rng.standard_normal((32, 48)).astype("float32"),
            "b": rng.standard_normal(48).astype("float32")}


def tiled(func, seed: int) -> Schedule:
    """A hand-made candidate: the matmul's rows split in 3 sampled tiles and its columns in 2,
    reordered, the outer rows parallel and the inner columns vectorized."""
    sch = Schedule(func, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    i0, i1, i2 = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=8))
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, k, i2, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return sch


def matmul_loops(func) -> list:
    """(extent, kind) of each loop around the matmul block of ``func``."""
    sch = Schedule(func)
    return [(int(sch.get(lp).extent.value), sch.get(lp).kind) for lp in sch.get_loops(sch.get_block("matmul"))]


def expected_loops(sch: Schedule) -> list:
    """The matmul's loops `tiled` makes with ``sch``'s decisions: i0 (parallel), j0, i1, k, i2,
    j1 (vectorized)."""
    (ti0, ti1, ti2), (tj0, tj1) = [d for d in sch.trace.decisions.values()]
    return [(ti0, "parallel"), (tj0, "serial"), (ti1, "serial"), (32, "serial"), (ti2, "serial"),
            (tj1, "vectorized")]


def distinct_candidates(func, n: int) -> list:
    """``n`` tiled schedules of ``func`` with pairwise different decisions."""
    out, seen = [], set()
    for seed in range(100):
        sch = tiled(func, seed)
        key = json.dumps(list(sch.trace.decisions.values()))
        if key not in seen:
            seen.add(key)
            out.append(sch)
        if len(out) == n:
            return out
    raise AssertionError("fewer distinct tilings than asked for")


def committed(path, func, secs: list, target="llvm") -> tuple:
    """A database in ``path`` with one tiled candidate of ``func`` per entry of ``secs`` (its
    run times, None: failed); (database, workload, schedules)."""
    db = JSONDatabase(path)
    workload = db.commit_workload(func)
    schedules = distinct_candidates(func, len(secs))
    for sch, s in zip(schedules, secs):
        db.commit_tuning_record(TuningRecord(sch.trace, workload, s, target))
    return db, workload, schedules


def reopened(path) -> JSONDatabase:
    """The database in ``path`` read again, failing the test on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return JSONDatabase(path)


def replayed(trace: Trace, func) -> Schedule:
    sch = Schedule(workload_module(func))
    trace.apply_to_schedule(sch)
    return sch


def lines(path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_vm(ex, inputs: dict) -> tuple:
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    z, s = vm["main"](*(tvms.nd.array(inputs[k]) for k in ("x", "w", "b")))
    return z.numpy(), s.numpy()


def check_numpy(z, s, inputs: dict) -> None:
    want = inputs["x"] @ inputs["w"] + inputs["b"]
    np.testing.assert_allclose(z, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, want.sum(axis=1), rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------------------------- the files


def test_a_database_round_trips_through_its_files(tmp_path, lowered):
    func = lowered[TUNED]
    db, workload, schedules = committed(tmp_path, func, [[3e-3, 3.2e-3], [1e-3], [2e-3], None])
    assert db.commit_workload(func) is workload and len(lines(tmp_path / WORKLOAD_FILE)) == 1
    args = [ArgInfo((64, 32), "float32"), ArgInfo((32, 48), "float32"), ArgInfo((48,), "float32"),
            ArgInfo((64, 48), "float32")]
    db.commit_tuning_record(TuningRecord(schedules[0].trace, workload, [5e-3], "llvm", args_info=args))

    again = reopened(tmp_path)
    assert len(again) == len(db) == 5
    w = again.commit_workload(func)
    assert w.shash == workload.shash and structural_equal(w.mod, workload_module(func))
    top, top_again = db.get_top_k(workload, 10), again.get_top_k(w, 10)
    assert [r.run_secs for r in top_again] == [r.run_secs for r in top] == [[1e-3], [2e-3], [3e-3, 3.2e-3], [5e-3]]
    assert [r.trace.as_json() for r in top_again] == [r.trace.as_json() for r in top]
    assert top_again[-1].args_info == args and top_again[0].target == "llvm"
    for record, sch in zip(top_again[:3], schedules[1:3] + schedules[:1]):
        assert structural_equal(replayed(record.trace, func).mod, replayed(sch.trace, func).mod)
    assert structural_equal(again.query_ir_module(func, "llvm"), replayed(schedules[1].trace, func).mod)

    # The files: MetaSchedule's two, one JSON value a line, the workload as TVMScript.
    (shash, entry), = lines(tmp_path / WORKLOAD_FILE)
    assert shash == workload.shash and entry["version"] == __version__
    assert structural_equal(tvms.parse(entry["mod"]), workload.mod)
    records = lines(tmp_path / TUNING_RECORD_FILE)
    assert [r[0] for r in records] == [0] * 5 and records[3][1]["run_secs"] is None
    assert records[4][1]["args_info"] == [[[64, 32], "float32"], [[32, 48], "float32"], [[48], "float32"],
                                          [[64, 48], "float32"]]
    assert set(records[0][1]) == {"trace", "run_secs", "target", "args_info", "version"}


def test_a_workload_is_found_whatever_the_function_is_named(tmp_path, lowered):
    func = lowered[TUNED]
    db, _, _ = committed(tmp_path, func, [[1e-3]])
    public = dataclasses.replace(func, private=False, attrs={**func.attrs, "global_symbol": "matmul_add7"})
    assert db.has_workload(public) and db.has_workload(tvms.ir.IRModule({"other": func}))
    assert not db.has_workload(lowered["sum"])
    out = apply_database(tvms.ir.IRModule({"matmul_add7": public}), db, "llvm")["matmul_add7"]
    assert out.attrs["global_symbol"] == "matmul_add7" and not out.private and out.attrs["tir.is_scheduled"]


def test_the_top_k_are_the_fastest_measured_records_of_the_target(tmp_path, lowered):
    func = lowered[TUNED]
    db, workload, _ = committed(tmp_path, func, [[3e-3], [1e-3, 1e-3], None, [8e-4, 4e-3], [5e-4]],
                                target="llvm")
    sch = tiled(func, 99)
    db.commit_tuning_record(TuningRecord(sch.trace, workload, [1e-4], "cuda"))
    best = [r.best_run_secs for r in db.get_top_k(workload, 10)]
    assert best == pytest.approx([1e-4, 5e-4, 8e-4, 1e-3, 3e-3])   # the failed one left out
    llvm = db.get_top_k(workload, 10, target="llvm")
    # Ranked by the fastest round, not the mean (which would put [8e-4, 4e-3] after [1e-3, 1e-3]).
    assert [r.mean_run_secs for r in llvm] == pytest.approx([5e-4, 2.4e-3, 1e-3, 3e-3])
    assert [r.best_run_secs for r in db.get_top_k(workload, 2, target=Target("llvm"))] == pytest.approx([5e-4, 8e-4])
    # "cuda" is an sm_90 by default: the same target as written out
    assert [r.run_secs for r in db.get_top_k(workload, 10, target="cuda -arch=sm_90")] == [[1e-4]]
    assert db.get_top_k(workload, 10, target="cuda -arch=sm_80") == [] and db.get_top_k(workload, 0) == []
    assert len(db) == 6 and len(db.get_all_tuning_records()) == 6
    assert db.query_tuning_record(func, "llvm") is llvm[0]
    with pytest.raises(ValueError, match="non-empty list"):
        TuningRecord(sch.trace, workload, [])
    with pytest.raises(ValueError, match="not a number of seconds"):
        TuningRecord(sch.trace, workload, [float("nan")])
    with pytest.raises(ValueError, match="unknown target kind"):
        TuningRecord(sch.trace, workload, [1.0], "gpu9000")


# ----------------------------------------------------------------------------- validation


def test_a_torn_last_line_is_skipped_with_a_warning_and_appending_goes_on(tmp_path, lowered):
    func = lowered[TUNED]
    db, workload, schedules = committed(tmp_path, func, [[2e-3], [1e-3]])
    line = json.dumps([0, TuningRecord(tiled(func, 7).trace, workload, [1e-5], "llvm").as_json()])
    with open(tmp_path / TUNING_RECORD_FILE, "a") as f:   # a run stopped half way through a line
        f.write(line[: len(line) // 2])
    with pytest.warns(DatabaseWarning, match=r"dropped 1 of 3 tuning records \(1 torn last line\)"):
        torn = JSONDatabase(tmp_path)
    assert [r.run_secs for r in torn.get_top_k(workload, 10)] == [[1e-3], [2e-3]]
    assert structural_equal(torn.query_ir_module(func, "llvm"), replayed(schedules[1].trace, func).mod)

    # The next run appends after it, on a line of its own; the torn line stays dropped.
    torn.commit_tuning_record(TuningRecord(tiled(func, 8).trace, workload, [5e-4], "llvm"))
    with pytest.warns(DatabaseWarning, match=r"dropped 1 of 4 tuning records \(1 malformed\)"):
        again = JSONDatabase(tmp_path)
    assert [r.run_secs for r in again.get_top_k(workload, 10)] == [[5e-4], [1e-3], [2e-3]]

    # A torn workload line still counts: a record of a later workload points at the right one.
    with open(tmp_path / WORKLOAD_FILE, "a") as f:
        f.write('["abc", {"mod": "@I.ir_mod')
    with pytest.warns(DatabaseWarning, match=r"dropped 1 of 2 workloads \(1 torn last line\)"):
        db = JSONDatabase(tmp_path)
    row_sum = lowered["sum"]
    sch = Schedule(row_sum)
    sch.parallel(sch.get_loops(sch.get_block(_only_block(row_sum)))[0])
    db.commit_tuning_record(TuningRecord(sch.trace, Workload(row_sum), [1e-6], "llvm"))
    with pytest.warns(DatabaseWarning, match=r"dropped 1 of 3 workloads \(1 malformed\)"):
        db = JSONDatabase(tmp_path)
    assert len(db) == 4 and structural_equal(db.query_ir_module(row_sum, "llvm"), replayed(sch.trace, row_sum).mod)
    assert json.loads((tmp_path / TUNING_RECORD_FILE).read_text().splitlines()[-1])[0] == 2   # its line


def _only_block(func) -> str:
    sch = Schedule(func)
    (block,) = sch.get_child_blocks(sch.get_block("root"))
    return block.name


@pytest.mark.parametrize("edit, why", [
    (lambda text: text.replace("T.float32(0.0)", "T.float32(1.0)"), "1 text that no longer matches its hash"),
    (lambda text: text.replace("@T.prim_func", "@T.prim_fun"), "1 text that does not parse"),
    (lambda text: text.replace("def main", "def main(("), "1 text that does not parse"),
])
def test_a_workload_whose_text_no_longer_matches_its_hash_is_dropped_with_its_records(tmp_path, lowered, edit, why):
    func, row_sum = lowered[TUNED], lowered["sum"]
    db, _, _ = committed(tmp_path, func, [[1e-3], [2e-3]])
    sch = Schedule(row_sum)
    sch.parallel(sch.get_loops(sch.get_block(_only_block(row_sum)))[0])
    db.commit_tuning_record(TuningRecord(sch.trace, Workload(row_sum), [1e-6], "llvm"))
    path = tmp_path / WORKLOAD_FILE
    first, second = path.read_text().splitlines()
    shash, entry = json.loads(first)
    assert edit(entry["mod"]) != entry["mod"]
    entry["mod"], entry["version"] = edit(entry["mod"]), "0.0.1"
    path.write_text(json.dumps([shash, entry]) + "\n" + second + "\n")
    with pytest.warns(DatabaseWarning) as caught:
        db = JSONDatabase(tmp_path)
    (message,) = [str(w.message) for w in caught]
    assert f"dropped 1 of 2 workloads ({why})" in message
    assert "2 of 3 tuning records (2 of a dropped workload); some were written by tvms 0.0.1" in message
    assert not db.has_workload(func) and db.query_schedule(func, "llvm") is None and len(db) == 1
    assert structural_equal(db.query_ir_module(row_sum, "llvm"), replayed(sch.trace, row_sum).mod)


def test_a_record_whose_trace_no_longer_replays_is_skipped_for_the_next_best(tmp_path, lowered):
    func = lowered[TUNED]
    db = JSONDatabase(tmp_path)
    workload = db.commit_workload(func)
    good, other = distinct_candidates(func, 2)
    renamed = json.loads(json.dumps(good.trace.as_json()).replace('"matmul"', '"matmul_gone"'))
    first_tile = min(good.trace.decisions)
    unfit = good.trace.with_decision(first_tile, [3, 5, 7])   # not factors of 64 any more
    db.commit_tuning_record(TuningRecord(Trace.from_json(renamed), workload, [1e-4], "llvm"))
    db.commit_tuning_record(TuningRecord(unfit, workload, [2e-4], "llvm"))
    db.commit_tuning_record(TuningRecord(good.trace, workload, [3e-4], "llvm"))
    db.commit_tuning_record(TuningRecord(other.trace, workload, [4e-4], "llvm"))

    db = reopened(tmp_path)   # they all validate: only replaying them shows what is wrong
    with pytest.warns(DatabaseWarning, match="no longer replays") as caught:
        best = db.query_schedule(func, "llvm")
    assert len(caught) == 2 and "matmul_gone" in str(caught[0].message) and "3, 5, 7" in str(caught[1].message)
    assert structural_equal(best.mod, replayed(good.trace, func).mod)
    with warnings.catch_warnings():   # known now: skipped without warning again
        warnings.simplefilter("error")
        assert db.query_tuning_record(func, "llvm").run_secs == [3e-4]


def test_a_record_that_is_not_made_of_schedule_primitives_is_dropped_on_loading(tmp_path, lowered):
    func = lowered[TUNED]
    db, workload, (sch,) = committed(tmp_path, func, [[1e-3]])
    trace = sch.trace.as_json()
    for kind, args in (("replace_func", [["func_name", "main"], ["func", 1]]), ("__init__", [])):
        bad = TuningRecord(sch.trace, workload, [1e-6], "llvm").as_json()
        bad["trace"] = {**trace, "insts": trace["insts"] + [[kind, args, None]]}
        with open(tmp_path / TUNING_RECORD_FILE, "a") as f:
            f.write(json.dumps([0, bad]) + "\n")
    with open(tmp_path / TUNING_RECORD_FILE, "a") as f:
        f.write(json.dumps([0, {**bad, "trace": trace, "run_secs": "fast"}]) + "\n")
        f.write(json.dumps([7, {**bad, "trace": trace}]) + "\n")
    with pytest.warns(DatabaseWarning) as caught:
        db = JSONDatabase(tmp_path)
    (message,) = [str(w.message) for w in caught]
    assert "dropped 4 of 5 tuning records" in message and "'replace_func' is not a schedule primitive" in message
    assert "'__init__' is not a schedule primitive" in message and "failed run: 'fast'" in message
    assert "1 of no workload" in message
    assert [r.run_secs for r in db.get_all_tuning_records()] == [[1e-3]]


# ----------------------------------------------------------------------------- compiling


@pytest.fixture
def built_kernels(monkeypatch) -> dict:
    """The PrimFuncs `tvms.compile` hands the CPU build, by name (what is really compiled)."""
    build = importlib.import_module("tvmscript.compiler.build")
    seen: dict = {}
    real = build.build_cpu

    def spy(funcs, **kwargs):
        seen.update(funcs)
        return real(funcs, **kwargs)

    monkeypatch.setattr(build, "build_cpu", spy)
    return seen


def test_compile_with_a_tuning_db_builds_the_tuned_kernel(tmp_path, lowered, inputs, built_kernels):
    func = lowered[TUNED]
    db, workload, schedules = committed(tmp_path, func, [[2e-3], [1e-3], [3e-3]])
    ex = tvms.compile(tvms.parse(SRC), "llvm", tuning_db=db)   # the pipeline runs first, then the database
    kernel = built_kernels[TUNED]
    assert {k: kernel.attrs.get(k) for k in TUNED_ATTRS} == TUNED_ATTRS
    assert matmul_loops(kernel) == expected_loops(schedules[1])
    assert default_schedule(kernel) is kernel   # the CPU's default schedule leaves it as tuned
    assert kernel.private and "global_symbol" not in kernel.attrs   # named and private as it was
    assert not any(k in built_kernels["sum"].attrs for k in TUNED_ATTRS)   # no record: the default
    check_numpy(*run_vm(ex, inputs), inputs)

    built_kernels.clear()
    ex = tvms.compile(lowered, "llvm", tuning_db=str(tmp_path))   # a work dir's path does the same
    assert matmul_loops(built_kernels[TUNED]) == expected_loops(schedules[1])
    check_numpy(*run_vm(ex, inputs), inputs)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        tvms.compile(lowered, "llvm", tuning_db=str(tmp_path / "nowhere"))


def test_without_a_record_for_the_target_the_default_schedule_is_kept(tmp_path, lowered, inputs, built_kernels):
    func = lowered[TUNED]
    db, workload, _ = committed(tmp_path, func, [[1e-3]], target="cuda")
    assert apply_database(lowered, db, "llvm") is lowered
    # The tuner's record of the default schedule (an empty trace) is the best: it stays default.
    db.commit_tuning_record(TuningRecord(Trace(), workload, [1e-6], "llvm"))
    db.commit_tuning_record(TuningRecord(tiled(func, 1).trace, workload, [1e-3], "llvm"))
    assert apply_database(lowered, db, "llvm") is lowered
    ex = tvms.compile(lowered, "llvm", tuning_db=db)
    assert not any(k in built_kernels[TUNED].attrs for k in TUNED_ATTRS)
    check_numpy(*run_vm(ex, inputs), inputs)


def test_meta_schedule_apply_database_takes_the_current_target(tmp_path, lowered, inputs):
    func = lowered[TUNED]
    db, _, schedules = committed(tmp_path, func, [[2e-3], [1e-3]])
    apply_pass = tvms.relax.transform.MetaScheduleApplyDatabase
    with Target("llvm"):
        out = apply_pass(work_dir=str(tmp_path))(lowered)
    tuned = out[TUNED]
    assert matmul_loops(tuned) == expected_loops(schedules[1]) and tuned.attrs["tir.noalias"]
    assert {k: tuned.attrs.get(k) for k in TUNED_ATTRS} == TUNED_ATTRS and tuned.private
    assert out["sum"] is lowered["sum"] and out["main"] is lowered["main"]
    assert matmul_loops(lowered[TUNED])[0] == (64, "serial")   # the input module is not changed
    check_numpy(*run_vm(tvms.compile(out, "llvm"), inputs), inputs)

    with Target("llvm"), db:   # TVM's way: the database in a `with`
        again = apply_pass()(lowered)
    assert structural_equal(again[TUNED], tuned)
    with Target("llvm"), pytest.warns(UserWarning, match="no tuning record of 'sum'"):
        apply_pass(database=db, enable_warning=True)(lowered)
    with Target("cuda"):
        assert apply_pass(database=db)(lowered) is lowered   # no record for the GPU
    with pytest.raises(ValueError, match="needs the target"):
        apply_pass(database=db)(lowered)
    with Target("llvm"), pytest.raises(ValueError, match="needs a database"):
        apply_pass()(lowered)


def test_a_cuda_record_is_applied_for_cuda_and_dlight_leaves_it_alone(tmp_path, lowered, inputs):
    from support.cuda_emulator import EmulatedModule
    from tvmscript.compiler.build_cuda import build_cuda, default_gpu_schedule

    func = lowered[TUNED]
    sch = Schedule(func)
    i, _, _ = sch.get_loops(sch.get_block("matmul"))
    i0, i1 = sch.split(i, factors=[2, 32])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    sch.reverse_compute_at(sch.get_block("T_add"), i1)
    db = JSONDatabase(tmp_path)
    db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(func), [1e-5], "cuda -arch=sm_90"))
    db.commit_tuning_record(TuningRecord(tiled(func, 0).trace, db.commit_workload(func), [1e-3], "llvm"))

    out = apply_database(lowered, db, Target("cuda"))
    assert out[TUNED].attrs["tir.is_scheduled"]
    scheduled = default_gpu_schedule(out, Target("cuda"))
    assert scheduled[TUNED] is out[TUNED] and scheduled["sum"] is not out["sum"]   # DLight: only the untuned
    prim_funcs = {gv.name_hint: f for gv, f in scheduled.functions.items() if isinstance(f, tir.PrimFunc)}
    code = build_cuda(prim_funcs, "cuda", kind="source")
    (launch,) = code.functions[TUNED].launches
    assert (launch.grid[0], launch.block[0]) == ("2", "32")   # the tuned binding, not a DLight rule's
    out = np.zeros((64, 48), "float32")
    EmulatedModule(code).run(TUNED, inputs["x"], inputs["w"], inputs["b"], out)   # the CUDA C, run on the CPU
    np.testing.assert_allclose(out, inputs["x"] @ inputs["w"] + inputs["b"], rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- the command line


@pytest.fixture
def program(tmp_path, lowered, inputs) -> dict:
    """SRC in a file, its inputs in a .npz, and a database in a folder tuned for its matmul."""
    path = tmp_path / "model.tvms"
    path.write_text(SRC)
    np.savez(tmp_path / "in.npz", **inputs)
    _, _, schedules = committed(tmp_path / "tuned", lowered[TUNED], [[2e-3], [1e-3]])
    return {"file": path, "inputs": tmp_path / "in.npz", "db": tmp_path / "tuned", "best": schedules[1]}


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_tvms_run_and_compile_with_tuned(tmp_path, program, lowered, inputs):
    proc = ok("run", program["file"], "--tuned", program["db"], "--inputs", program["inputs"],
              "--out", tmp_path / "out.npz")
    assert f"tuned schedules for 1 of 2 kernels ({TUNED}) on llvm" in proc.err
    out = load_npz(tmp_path / "out.npz")
    check_numpy(out["output_0"], out["output_1"], inputs)

    # --emit llvm: the tuned kernel's code is what tvms.compile makes with the database
    tuned_ir = ok("compile", program["file"], "--tuned", program["db"], "--emit", "llvm-unopt").out
    default_ir = ok("compile", program["file"], "--emit", "llvm-unopt").out
    ex = tvms.compile(lowered, "llvm", tuning_db=str(program["db"]))
    assert tuned_ir != default_ir
    assert tuned_ir.rstrip("\n") == ex.kernels[TUNED].module.get_source("llvm-unopt").rstrip("\n")


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_tvms_tuned_errors_and_a_damaged_database(tmp_path, program):
    proc = run_tvms("compile", program["file"], "--tuned", tmp_path / "nowhere")
    assert proc.returncode == 1 and "--tuned" in proc.err and "no such folder" in proc.err
    (tmp_path / "empty").mkdir()
    proc = run_tvms("run", program["file"], "--tuned", tmp_path / "empty")
    assert proc.returncode == 1 and "no tuning database there" in proc.err

    path = program["db"] / WORKLOAD_FILE
    shash, entry = json.loads(path.read_text())
    path.write_text(json.dumps(["0" * 64, entry]) + "\n")
    proc = ok("run", program["file"], "--tuned", program["db"], "--inputs", program["inputs"])
    assert "warning: tuning database" in proc.err and "no longer matches its hash" in proc.err
    assert "tuned schedules for 0 of 2 kernels on llvm; it holds none of this module's kernels" in proc.err
