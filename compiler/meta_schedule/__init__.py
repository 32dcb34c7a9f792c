"""Auto-tuning (TVM's MetaSchedule): search for fast schedules of each PrimFunc instead of
taking the one a fixed rule picks.

The parts, in the order a candidate meets them:

* `space` and `schedule_rules/`: the search space. Schedule rules, one small class each
  (multi-level tiling, auto-inline, parallel / vectorize / unroll, random compute location,
  cross-thread reduction), applied to each block of a function, write *design spaces*:
  schedules whose tile sizes, unroll limits and compute locations are sampling instructions
  (`compiler.schedule.sampling`). A candidate is a design space's trace with its decisions
  drawn again (`Trace.apply_to_schedule(resample=True)`), then finished by the `postproc`s.
* `measure`: the types builders and runners exchange (`BuildInput`, `BuildResult`,
  `RunnerInput`, `RunnerResult`, `ArgInfo`).
* `builder` and `runner`: candidates compiled in a process pool and timed in a separate
  process with a timeout each, so that a crashing or hanging kernel costs one candidate;
  every result is checked against the default schedule's before its time counts.
  `dask_runner`: the same interface on a Dask cluster.
* `database`: workloads (keyed by structural hash and target) and tuning records (a trace,
  its run times) as JSON lines, as MetaSchedule's ``database_workload.json`` and
  ``database_tuning_record.json``; read back validated, never trusted.
* `cost_model` and `features`: a model learned from the measurements that ranks candidates
  before they are measured.
* `search`: evolutionary search over traces, seeded from random samples and the default
  schedule (which is always measured, so tuning can only improve on it).
* `tune`: ``tune_tir`` and the task scheduler that shares trials among a model's PrimFuncs;
  applying a database to a module at compile time.
"""
