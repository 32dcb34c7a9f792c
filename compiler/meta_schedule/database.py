"""The tuning database, with MetaSchedule's names: `Workload`, `TuningRecord`, `JSONDatabase`.

A tuning run measures thousands of candidates; what it keeps is, per function tuned (a
*workload*), the traces of the candidates it measured and their run times (*tuning records*).
Compiling later replays the best record's trace on the function (`Database.query_schedule`,
`compiler.meta_schedule.apply`) instead of taking the default schedule.

A workload is a PrimFunc held as ``IRModule({"main": func})`` and keyed by its structural hash
(`tvmscript.ir.structural.structural_hash`), so that the same function lowered again from the
same model, in another process, under another name (``fused_matmul_add1``) or with other
variable names finds its records. A lone PrimFunc or a one-function module is normalized
first (`workload_module`): named ``main``, public, ``global_symbol`` "main", as TVM does.

`JSONDatabase` keeps MetaSchedule's two files in a work dir, one JSON value per line::

    database_workload.json       [shash, {"mod": "<TVMScript of the module>", "version": "0.1.0"}]
    database_tuning_record.json  [workload_index, {"trace": ..., "run_secs": [...], "target": "llvm",
                                                   "args_info": [[[64, 32], "float32"], ...], "version": ...}]

(``workload_index``: the workload's line in the first file, counting non-blank lines from 0.)
Lines are appended one at a time and flushed, so a run stopped by Ctrl-C keeps every record
written before it; a last line torn by the stop is skipped on reading.

Why the files are validated, never trusted: they outlive the tvms that wrote them and get
copied between machines and edited by hand. On loading, each workload's text is parsed back
and its hash recomputed, and each record's fields and trace checked (only schedule primitives,
JSON values only: nothing is ever evaluated); what fails is dropped with one warning
(`DatabaseWarning`) saying how many and why. A record whose trace no longer replays on its
function (a primitive refusing a step) is skipped when queried, and the next best is used.

One process writes a database at a time (records point at workloads by line number).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import json
import math
import os
import threading
import warnings
from typing import Optional

from tvmscript.ir import IRModule, tir
from tvmscript.ir.structural import structural_hash
from tvmscript.version import __version__

from ..schedule import Schedule, ScheduleError
from ..schedule.trace import Trace, TraceError
from ..schedule_choices import check_choices  # (importing it makes choose_cpu_schedule and choose_gpu_schedule primitives)
from .measure import ArgInfo

__all__ = ["Workload", "TuningRecord", "Database", "JSONDatabase", "DatabaseWarning", "workload_module",
           "WORKLOAD_FILE", "TUNING_RECORD_FILE"]

WORKLOAD_FILE = "database_workload.json"
TUNING_RECORD_FILE = "database_tuning_record.json"

# What a failed replay raises: a primitive refusing a step, a trace that cannot be replayed, or
# arguments this version's primitives no longer take (a database of another version).
_REPLAY_ERRORS = (ScheduleError, TraceError, TypeError, ValueError)


class DatabaseWarning(UserWarning):
    """Part of a tuning database was dropped or skipped: the rest is still used."""


def workload_module(mod) -> IRModule:
    """``mod`` (a PrimFunc, or an IRModule holding exactly one) as a workload's module:
    ``IRModule({"main": func})`` with ``func`` public and its ``global_symbol`` "main". Why:
    the structural hash covers function names and attributes, and the same kernel is
    ``fused_matmul_add`` in one model and ``fused_matmul_add3`` in the next."""
    if isinstance(mod, IRModule):
        funcs = list(mod.functions.values())
        if len(funcs) != 1 or not isinstance(funcs[0], tir.PrimFunc):
            raise ValueError(f"a workload is one PrimFunc; this module holds {len(funcs)} functions")
        func = funcs[0]
    elif isinstance(mod, tir.PrimFunc):
        func = mod
    else:
        raise TypeError(f"a workload is a PrimFunc or an IRModule holding one, not {type(mod).__name__}")
    attrs = dict(func.attrs or {})
    attrs["global_symbol"] = "main"
    return IRModule({"main": dataclasses.replace(func, attrs=attrs, private=False)})


class Workload:
    """A function to tune: ``mod`` (`workload_module`'s form) and ``shash``, its structural
    hash (a hex string)."""

    __slots__ = ("mod", "shash")

    def __init__(self, mod, shash: Optional[str] = None) -> None:
        self.mod = workload_module(mod)
        self.shash = structural_hash(self.mod) if shash is None else shash

    def as_json(self) -> list:
        """The workload's line: ``[shash, {"mod": text, "version": tvms's}]``."""
        return [self.shash, {"mod": self.mod.script(show_meta=True), "version": __version__}]

    @classmethod
    def from_json(cls, data) -> "Workload":
        """The workload a line holds, once its text parses back to a function of its hash;
        else `_Dropped` saying why."""
        from tvmscript.parser import parse_source

        if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)
                and isinstance(data[1], dict) and isinstance(data[1].get("mod"), str)):
            raise _Dropped("malformed")
        shash, text = data[0], data[1]["mod"]
        try:
            mod = cls(parse_source(text, "<tuning database>"))
        except Exception:  # noqa: BLE001 - text from a file: whatever fails, it does not parse
            raise _Dropped("text that does not parse", data[1].get("version")) from None
        if mod.shash != shash:
            raise _Dropped("text that no longer matches its hash", data[1].get("version"))
        return mod

    def __repr__(self) -> str:
        return f"Workload({self.shash[:12]})"


class TuningRecord:
    """A measured candidate of ``workload``: its ``trace`` (a `Trace` made on a `Schedule` of
    the workload's module), ``run_secs`` (seconds per run; None: it failed or was not
    measured), the ``target`` it ran on (text, such as "llvm" or "cuda -arch=sm_90"),
    ``args_info`` (`ArgInfo` of each parameter) and the tvms ``version`` that wrote it."""

    __slots__ = ("trace", "workload", "run_secs", "target", "args_info", "version")

    def __init__(self, trace: Trace, workload: Workload, run_secs=None, target=None, args_info=None) -> None:
        if not isinstance(trace, Trace):
            raise TypeError(f"a tuning record's trace is a Trace, not {type(trace).__name__}")
        if not isinstance(workload, Workload):
            raise TypeError(f"a tuning record's workload is a Workload, not {type(workload).__name__}")
        self.trace = trace
        self.workload = workload
        self.run_secs = _checked_run_secs(run_secs)
        self.target = None if target is None else _checked_target(target)
        self.args_info = None if args_info is None else [_checked_arg_info(a) for a in args_info]
        self.version = __version__

    @property
    def mean_run_secs(self) -> Optional[float]:
        """The mean of ``run_secs``; None for a failed record."""
        return None if self.run_secs is None else sum(self.run_secs) / len(self.run_secs)

    @property
    def best_run_secs(self) -> Optional[float]:
        """The fastest of ``run_secs``: what records are ranked by (None for a failed one).
        Why not the mean, as TVM ranks them: on a shared machine a round is only ever slowed,
        by whatever else runs then (rounds of one kernel measured 0.87 to 1.48 ms on a 2-core
        cloud VM), so the fastest round is the closest to the kernel's own time."""
        return None if self.run_secs is None else min(self.run_secs)

    def as_json(self) -> dict:
        args = None if self.args_info is None else [[list(a.shape), a.dtype] for a in self.args_info]
        return {"trace": self.trace.as_json(), "run_secs": self.run_secs, "target": self.target,
                "args_info": args, "version": self.version}

    @classmethod
    def from_json(cls, data, workload: Workload) -> "TuningRecord":
        """The record a line holds (for ``workload``); ValueError saying what is wrong with it."""
        if not isinstance(data, dict):
            raise ValueError("not a record")
        trace = Trace.from_json(data.get("trace"))
        for inst in trace.insts:
            if not _is_primitive(inst.kind):
                raise TraceError(f"'{inst.kind}' is not a schedule primitive")
            if inst.kind in ("choose_cpu_schedule", "choose_gpu_schedule"):
                check_choices(inst.arg("choices"))
        record = cls(trace, workload, data.get("run_secs"), data.get("target"), data.get("args_info"))
        version = data.get("version")
        record.version = version if isinstance(version, str) else "unknown"
        return record

    def __repr__(self) -> str:
        return f"TuningRecord({self.workload!r}, run_secs={self.run_secs}, target={self.target!r})"


def _is_primitive(kind: str) -> bool:
    """Whether a trace instruction names a schedule primitive (what `primitive` made a method
    of `Schedule`), so that a replay never calls anything else of it."""
    method = getattr(Schedule, kind, None) if not kind.startswith("_") else None
    return callable(method) and hasattr(method, "__wrapped__")


def _checked_run_secs(run_secs) -> Optional[list]:
    if run_secs is None:
        return None
    if not isinstance(run_secs, (list, tuple)) or not run_secs:
        raise ValueError(f"run_secs is a non-empty list of seconds, or None for a failed run: {run_secs!r}")
    out = []
    for s in run_secs:
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
            raise ValueError(f"run_secs holds {s!r}, not a number of seconds")
        out.append(float(s))
    return out


def _checked_target(target) -> str:
    """The target as text (a `Target` printed canonically); ValueError for text that is not a
    target."""
    from tvmscript.target import Target

    if isinstance(target, Target):
        return str(target)
    if not isinstance(target, str):
        raise ValueError(f"a record's target is text such as \"llvm\", not {target!r}")
    Target(target)   # raises for text that is not a target
    return target


def _checked_arg_info(a) -> ArgInfo:
    if isinstance(a, ArgInfo):
        return a
    if (isinstance(a, (list, tuple)) and len(a) == 2 and isinstance(a[0], (list, tuple)) and isinstance(a[1], str)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in a[0])):
        return ArgInfo(tuple(a[0]), a[1])
    raise ValueError(f"an argument's info is [shape, dtype], not {a!r}")


def target_key(target) -> Optional[str]:
    """The canonical text of a target, for comparing them: ``cuda`` and ``cuda -arch=sm_90``
    are the same target (its default architecture), ``llvm -mcpu=znver4`` is not ``llvm``."""
    from tvmscript.target import Target

    if target is None:
        return None
    return _text_key(target) if isinstance(target, str) else str(Target(target))


@functools.lru_cache(maxsize=256)
def _text_key(text: str) -> str:
    """`target_key` of a target's text, kept: every record of a query is compared by it."""
    from tvmscript.target import Target

    return str(Target(text))


# ----------------------------------------------------------------------------- the database


class _Stack(threading.local):
    def __init__(self) -> None:
        self.databases: list = []


_CURRENT = _Stack()


class Database(abc.ABC):
    """What compiling asks of tuning records: the best schedule of a function for a target.
    Subclasses store them (`JSONDatabase`); this class picks the best one that still replays.
    ``with database:`` makes it `Database.current()`, which
    ``relax.transform.MetaScheduleApplyDatabase()`` reads when given none (as TVM's does)."""

    def __init__(self) -> None:
        self._unreplayable: set = set()   # ids of the records found not to replay (warned once)

    @abc.abstractmethod
    def has_workload(self, mod) -> bool:
        """Whether the database holds the workload of ``mod``."""

    @abc.abstractmethod
    def commit_workload(self, mod) -> Workload:
        """The workload of ``mod``, added if new."""

    @abc.abstractmethod
    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Add a record (and its workload, if new)."""

    @abc.abstractmethod
    def get_top_k(self, workload: Workload, k: int, target=None) -> list:
        """The ``k`` fastest measured records of ``workload`` (for ``target``, when given)."""

    @abc.abstractmethod
    def get_all_tuning_records(self) -> list:
        """Every record, in the order committed."""

    def query_tuning_record(self, mod, target=None) -> Optional[TuningRecord]:
        """The fastest record of ``mod``'s workload for ``target`` whose trace replays."""
        found = self._best(mod, target)
        return None if found is None else found[0]

    def query_schedule(self, mod, target=None) -> Optional[Schedule]:
        """A fresh `Schedule` of ``mod`` (`workload_module`'s form) with the best record's
        trace replayed on it; None when no record of it for ``target`` replays."""
        found = self._best(mod, target)
        return None if found is None else found[1]

    def query_ir_module(self, mod, target=None) -> Optional[IRModule]:
        """The module `query_schedule`'s schedule made, or None."""
        sch = self.query_schedule(mod, target)
        return None if sch is None else sch.mod

    def _best(self, mod, target) -> Optional[tuple]:
        """(record, schedule) of the fastest record that replays on ``mod``. A record that does
        not is skipped with a warning (once: it is remembered) and the next one tried."""
        workload = Workload(mod)
        for record in self.get_top_k(workload, len(self.get_all_tuning_records()), target):
            if id(record) in self._unreplayable:
                continue
            sch = Schedule(workload.mod)
            try:
                record.trace.apply_to_schedule(sch)
            except _REPLAY_ERRORS as err:
                self._unreplayable.add(id(record))
                warnings.warn(f"{self}: a tuning record of workload {workload.shash[:12]} (run_secs "
                              f"{record.run_secs}) no longer replays ({type(err).__name__}: {err}); "
                              "the next best is used", DatabaseWarning, stacklevel=3)
                continue
            return record, sch
        return None

    def __enter__(self) -> "Database":
        _CURRENT.databases.append(self)
        return self

    def __exit__(self, *exc) -> None:
        if not _CURRENT.databases or _CURRENT.databases[-1] is not self:
            raise RuntimeError("Database scopes must be exited in the order they were entered")
        _CURRENT.databases.pop()

    @staticmethod
    def current() -> Optional["Database"]:
        """The innermost database entered with ``with`` on this thread, or None."""
        return _CURRENT.databases[-1] if _CURRENT.databases else None


class JSONDatabase(Database):
    """MetaSchedule's JSON database: ``database_workload.json`` and
    ``database_tuning_record.json`` in ``work_dir`` (or the two paths given). The files are
    read, and validated (see the module docstring), once here; commits append to them.
    ``allow_missing``: create missing files (and folders); else FileNotFoundError."""

    def __init__(self, work_dir=None, path_workload=None, path_tuning_record=None,
                 allow_missing: bool = True) -> None:
        if work_dir is not None:
            path_workload = path_workload or os.path.join(work_dir, WORKLOAD_FILE)
            path_tuning_record = path_tuning_record or os.path.join(work_dir, TUNING_RECORD_FILE)
        if path_workload is None or path_tuning_record is None:
            raise ValueError("JSONDatabase needs a work_dir, or both path_workload and path_tuning_record")
        super().__init__()
        self.work_dir = work_dir
        self._workload_file = _JSONLines(os.fspath(path_workload), allow_missing)
        self._record_file = _JSONLines(os.fspath(path_tuning_record), allow_missing)
        self._workloads: dict = {}       # shash -> Workload
        self._index: dict = {}           # shash -> its line in the workload file
        self._records: list = []         # every record, in file order
        self._by_workload: dict = {}     # shash -> its records
        _Loader(self).load()

    @property
    def path_workload(self) -> str:
        return self._workload_file.path

    @property
    def path_tuning_record(self) -> str:
        return self._record_file.path

    def has_workload(self, mod) -> bool:
        return Workload(mod).shash in self._workloads

    def commit_workload(self, mod) -> Workload:
        """The workload of ``mod``; a new one is written to the file at once. Its text must
        read back to the same hash (else ValueError): a workload the next load would drop is
        not worth tuning."""
        workload = mod if isinstance(mod, Workload) else Workload(mod)
        known = self._workloads.get(workload.shash)
        if known is not None:
            return known
        line = workload.as_json()
        try:
            Workload.from_json(json.loads(json.dumps(line)))
        except _Dropped as err:
            raise ValueError(f"this function cannot be stored in a tuning database: the printer's {err.reason} "
                             "(a bug in tvms's printer or parser)") from None
        self._index[workload.shash] = self._workload_file.append(line)
        self._add_workload(workload)
        return workload

    def commit_tuning_record(self, record: TuningRecord) -> None:
        workload = self.commit_workload(record.workload)
        if workload is not record.workload:   # the database's own object, for `get_top_k`
            record = _with_workload(record, workload)
        self._record_file.append([self._index[workload.shash], record.as_json()])
        self._add_record(record)

    def get_top_k(self, workload: Workload, k: int, target=None) -> list:
        """The ``k`` records of ``workload`` with the lowest mean run time (failed ones left
        out); with ``target``, only those measured on it (`target_key`). Ties keep the order
        they were committed in."""
        if k < 0:
            raise ValueError(f"k must not be negative, got {k}")
        key = target_key(target)

        def wanted(r: TuningRecord) -> bool:
            return r.run_secs is not None and (key is None or (r.target is not None and target_key(r.target) == key))

        records = [r for r in self._by_workload.get(workload.shash, []) if wanted(r)]
        return sorted(records, key=lambda r: r.best_run_secs)[:k]

    def get_all_tuning_records(self) -> list:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"JSONDatabase({self._where()!r})"

    def __str__(self) -> str:
        return f"tuning database {self._where()}"

    def _where(self) -> str:
        return os.fspath(self.work_dir) if self.work_dir is not None else self.path_workload

    def _add_workload(self, workload: Workload) -> None:
        self._workloads[workload.shash] = workload
        self._by_workload.setdefault(workload.shash, [])

    def _add_record(self, record: TuningRecord) -> None:
        self._records.append(record)
        self._by_workload[record.workload.shash].append(record)


def _with_workload(record: TuningRecord, workload: Workload) -> TuningRecord:
    copy = TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
    copy.version = record.version
    return copy


# ----------------------------------------------------------------------------- the files


class _Dropped(Exception):
    """Why a line of a database file is not used (and the tvms version that wrote it)."""

    def __init__(self, reason: str, version=None) -> None:
        super().__init__(reason)
        self.reason, self.version = reason, version


class _JSONLines:
    """A file of one JSON value per line, read whole and appended to a line at a time. A line
    is its number among the non-blank lines. A last line without its newline (a write cut off)
    is torn: it is reported as such, and the next append starts a new line after it."""

    def __init__(self, path: str, allow_missing: bool) -> None:
        self.path = path
        self.count = 0
        self._open_line = False   # the file ends without a newline
        if not os.path.exists(path):
            if not allow_missing:
                raise FileNotFoundError(f"no tuning database file {path}")
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            open(path, "a", encoding="utf-8").close()

    def read(self) -> list:
        """``(line, value or _Dropped)`` for each non-blank line."""
        with open(self.path, "rb") as f:
            data = f.read()
        self._open_line = bool(data) and not data.endswith(b"\n")
        lines = [line for line in data.split(b"\n") if line.strip()]
        out = []
        for n, raw in enumerate(lines):
            try:
                value = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):
                torn = self._open_line and n == len(lines) - 1
                value = _Dropped("torn last line" if torn else "malformed")
            out.append((n, value))
        self.count = len(lines)
        return out

    def append(self, value) -> int:
        """Write ``value`` as the next line, flushed before returning; its line number."""
        text = json.dumps(value, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(("\n" if self._open_line else "") + text + "\n")
            f.flush()
        self._open_line = False
        self.count += 1
        return self.count - 1


_REASONS_SHOWN = 4   # in the warning, per file: a damaged file could give each line a reason of its own


class _Loader:
    """Reads a `JSONDatabase`'s files into it, dropping what does not validate, and warns once
    with how many lines of each file were dropped and why."""

    def __init__(self, db: JSONDatabase) -> None:
        self.db = db
        self.dropped = {"workloads": {}, "tuning records": {}}   # kind -> reason -> count
        self.versions: set = set()
        self.totals = {"workloads": 0, "tuning records": 0}

    def load(self) -> None:
        by_line = self._workloads()
        self._records(by_line)
        self._warn()

    def _workloads(self) -> dict:
        """line -> Workload, or the reason that line was dropped."""
        db, by_line = self.db, {}
        for n, value in db._workload_file.read():
            self.totals["workloads"] += 1
            try:
                if isinstance(value, _Dropped):
                    raise value
                workload = Workload.from_json(value)
            except _Dropped as why:
                self._drop("workloads", why)
                by_line[n] = why
                continue
            known = db._workloads.get(workload.shash)
            if known is None:     # a workload written twice: the first line is its index
                db._index[workload.shash] = n
                db._add_workload(workload)
            by_line[n] = known or workload
        return by_line

    def _records(self, by_line: dict) -> None:
        db = self.db
        for _, value in db._record_file.read():
            self.totals["tuning records"] += 1
            try:
                if isinstance(value, _Dropped):
                    raise value
                if not (isinstance(value, list) and len(value) == 2 and type(value[0]) is int):
                    raise _Dropped("malformed")
                workload = by_line.get(value[0])
                if workload is None:
                    raise _Dropped("of no workload")
                if isinstance(workload, _Dropped):
                    raise _Dropped("of a dropped workload")
                data = value[1]
                try:
                    record = TuningRecord.from_json(data, workload)
                except (ValueError, TypeError) as err:
                    version = data.get("version") if isinstance(data, dict) else None
                    raise _Dropped(f"invalid ({_short(err)})", version) from None
            except _Dropped as why:
                self._drop("tuning records", why)
                continue
            db._add_record(record)

    def _drop(self, kind: str, why: _Dropped) -> None:
        reasons = self.dropped[kind]
        reasons[why.reason] = reasons.get(why.reason, 0) + 1
        if isinstance(why.version, str) and why.version != __version__:
            self.versions.add(why.version)

    def _warn(self) -> None:
        parts = []
        for kind, reasons in self.dropped.items():
            if reasons:
                count = sum(reasons.values())
                shown = list(reasons.items())[:_REASONS_SHOWN]
                why = [f"{n} {reason}" for reason, n in shown]
                if len(reasons) > len(shown):
                    why.append(f"{count - sum(n for _, n in shown)} for other reasons")
                parts.append(f"{count} of {self.totals[kind]} {kind} ({', '.join(why)})")
        if not parts:
            return
        written = f"; some were written by tvms {', '.join(sorted(self.versions))}, this is {__version__}" \
            if self.versions else ""
        warnings.warn(f"{self.db}: dropped {' and '.join(parts)}{written}; the rest is used", DatabaseWarning,
                      stacklevel=4)


def _short(err: Exception, limit: int = 100) -> str:
    text = str(err)
    return text if len(text) <= limit else text[:limit - 3] + "..."
