"""The table of ONNX converters: op type -> the functions translating its versions.

Each converter is one small function ``convert(ctx) -> expr | list of exprs`` registered with::

    @converter("Split", since=18)      # Split-18 and later (num_outputs, split as an input)
    def split_18(ctx): ...

An ONNX op changes meaning between versions of its schema (Split-13 takes ``split`` as an input,
Split-18 adds ``num_outputs``; ReduceMean-18 moves ``axes`` from an attribute to an input).
The version a node follows is its schema's ``since_version`` at the model's opset; the
converter used is the one with the greatest ``since`` not above it (``since=1``: the meaning
has not changed in any version an opset-13 model can hold). Models older than `OLDEST_OPSET`
are refused as a whole (importer.py); a node whose schema is newer than the one at
`NEWEST_OPSET` (a version this table has not been checked against) is refused rather than
guessed, so a model at opset 24 imports as long as its ops did not change after opset 21.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

# The opsets this importer is written and tested for.
OLDEST_OPSET = 13
NEWEST_OPSET = 21


@dataclass(frozen=True)
class Converter:
    op_type: str
    since: int
    fn: Callable


# op type -> converters, sorted by ``since``
CONVERTERS: dict[str, list[Converter]] = {}


def converter(*op_types: str, since: int = 1):
    """Register the decorated function for each of `op_types`, from schema version `since`."""
    def register(fn):
        for op_type in op_types:
            entries = CONVERTERS.setdefault(op_type, [])
            if any(c.since == since for c in entries):
                raise ValueError(f"ONNX converter for {op_type} since version {since} registered twice")
            entries.append(Converter(op_type, since, fn))
            entries.sort(key=lambda c: c.since)
        return fn
    return register


def schema_version(op_type: str, opset: int) -> Optional[int]:
    """The ``since_version`` of `op_type`'s schema at `opset` (None when ONNX has none)."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op_type, opset).since_version
    except onnx.defs.SchemaError:
        return None


def find_converter(op_type: str, opset: int) -> tuple[Optional[Converter], str]:
    """``(converter, "")`` for `op_type` at `opset`, or ``(None, why not)``."""
    entries = CONVERTERS.get(op_type)
    if not entries:
        return None, ""
    version = schema_version(op_type, opset)
    if version is None:
        return None, f"ONNX defines no {op_type} at opset {opset}"
    newest = schema_version(op_type, NEWEST_OPSET)
    if newest is not None and version > newest:
        return None, (f"{op_type}-{version} (opset {opset}) is newer than the versions this importer "
                      f"knows (up to opset {NEWEST_OPSET}, {op_type}-{newest})")
    usable = [c for c in entries if c.since <= version]
    if not usable:
        return None, (f"{op_type}-{version} (opset {opset}) is older than the versions this importer "
                      f"translates ({op_type}-{entries[0].since} and later)")
    return usable[-1], ""


def supported_ops() -> list[str]:
    """The op types that have a converter, sorted."""
    return sorted(CONVERTERS)
