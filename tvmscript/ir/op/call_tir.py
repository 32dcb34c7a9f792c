"""A call_tir against the PrimFunc it calls: what TVM's ``ValidateCallTIR`` checks.

``R.call_tir(cls.f, (x, ...), out_sinfo=[...], tir_vars=...)`` passes the PrimFunc's buffer
parameters the arguments, then the outputs (for ``call_tir_inplace``, only the outputs whose
inplace index is -1: the others are arguments written in place), and its scalar parameters the
``tir_vars``. The PrimFunc's symbolic sizes follow from what is passed: where a parameter's
dimension is a size ``n`` of the PrimFunc, ``n`` takes the value of that dimension of the
tensor passed (its first such dimension; a scalar parameter takes its tir_var). With those
values substituted, every buffer parameter's shape must agree with the tensor passed for it:
the argument's shape, or the declared output.

`call_tir_mismatch` finds the first contradiction: a kind, dtype or rank that differs, two
constant dimensions that differ, or symbolic ones that differ for every size unless both are 0
(an output declared ``(2 * n, 64)`` where the PrimFunc writes ``(n, 64)``, its ``n`` being the
argument's). A dimension that may agree or not (``8`` where the PrimFunc writes ``n``) is none:
the call checks it when it runs. TVM's well-formed check refuses that case too, as it cannot
prove the two equal; tvms keeps a program that is right whenever the sizes agree.

The parser notes the contradictions as it reads the calls (`relax_calls._note_contradiction`),
`tvms check` reports them (`well_formed`), the build refuses what it can see of them: this is
the IR's, below all three. Its messages print dims and struct info through the registered
printer (`tvmscript.ir.node.printer`), which the IR does not import.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import relax, tir
from tvmscript.ir.tir_visitor import vars_in

from ..arith.bound import const_int_bound
from ..arith.canonical import Canonical, widen
from ..mutator import substitute
from ..node import printer

__all__ = ["call_tir_mismatch", "describe_arg"]


@dataclasses.dataclass
class _Passed:
    """A tensor passed for a buffer parameter: the parameter, its buffer, what is passed."""

    param: tir.Var
    buffer: tir.Buffer
    sinfo: object
    what: str  # "'x'" or "output 0", as messages name it
    output: bool


def call_tir_mismatch(kname: str, prim: tir.PrimFunc, args: list, outputs: list, tir_vars: Optional[list] = None,
                      inplace_indices: Optional[list] = None, op: str = "R.call_tir") -> Optional[str]:
    """The first contradiction between a call of ``prim`` (named ``kname``) and its signature;
    None if there is none. ``args`` are ``(struct info, description)`` of the arguments,
    ``outputs`` the declared output struct infos, ``tir_vars`` the PrimExprs passed for the
    scalar parameters (None when the call passes none)."""
    buffers = [(p, prim.buffer_map[p]) for p in prim.params if p in prim.buffer_map]
    scalars = [p for p in prim.params if p not in prim.buffer_map]
    inplace = list(inplace_indices) if inplace_indices is not None else [-1] * len(outputs)
    if len(inplace) != len(outputs) or any(i >= len(args) for i in inplace):
        return (f"{op} to '{kname}': inplace_indices {inplace} do not fit its {len(args)} argument(s) and "
                f"{len(outputs)} output(s)")
    created = sum(1 for i in inplace if i < 0)
    if len(buffers) != len(args) + created:
        return (f"{op} to '{kname}' passes {len(args)} argument(s) and {created} output(s), but the prim_func has "
                f"{len(buffers)} buffer parameter(s) ({', '.join(p.name for p, _ in buffers)})")
    tir_vars = list(tir_vars or [])
    if len(scalars) != len(tir_vars):
        return (f"{op} to '{kname}' passes {len(tir_vars)} tir_vars, but the prim_func has {len(scalars)} scalar "
                f"parameter(s) ({', '.join(p.name for p in scalars) or 'none'})")
    passed = [_Passed(*buffers[i], sinfo, what, False) for i, (sinfo, what) in enumerate(args)]
    fresh = iter(buffers[len(args):])
    for k, (sinfo, index) in enumerate(zip(outputs, inplace)):
        param, buf = buffers[index] if index >= 0 else next(fresh)
        passed.append(_Passed(param, buf, sinfo, f"output {k}", True))
    solved = {p: (value, f"tir_vars[{i}]") for i, (p, value) in enumerate(zip(scalars, tir_vars))}
    for item in passed:
        _solve(item, solved)
        why = _mismatch(item, solved)
        if why is not None:
            return (f"{op} to '{kname}': {item.what} is {_sinfo_text(item.sinfo)}, "
                    f"but {_expected_text(item, solved)} ({why})")
    return None


def _solve(item: _Passed, solved: dict) -> None:
    """Add to ``solved`` (PrimFunc size -> (value, where it comes from)) the sizes that
    ``item``'s parameter names in a dimension of its own and that are not solved yet."""
    sinfo = item.sinfo
    if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.shape is None:
        return
    for d, (want, got) in enumerate(zip(item.buffer.shape, sinfo.shape)):
        if isinstance(want, tir.Var) and want not in solved:
            solved[want] = (got, f"dimension {d} of {item.what}")


def _expected_text(item: _Passed, solved: dict) -> str:
    """What the PrimFunc expects of ``item``: for an output whose every size the call
    determines, the tensor the PrimFunc writes (its shape in the caller's terms); else the
    parameter's buffer."""
    shape = item.buffer.shape
    if item.output and all(v in solved for v in vars_in(shape)):
        values = {v: solved[v][0] for v in vars_in(shape)}
        writes = relax.TensorStructInfo([widen(substitute(d, values)) for d in shape], item.buffer.dtype)
        return f"from its arguments the prim_func writes {_sinfo_text(writes)}"
    return f"parameter '{item.param.name}' is {_buffer_text(item.buffer)}"


def describe_arg(arg) -> str:
    """A call_tir argument as messages name it: ``'x'`` for a variable, else its kind."""
    return f"'{arg.name_hint}'" if isinstance(arg, relax.Var) else type(arg).__name__


def _mismatch(item: _Passed, solved: dict) -> Optional[str]:
    """Why ``item`` cannot be passed for its parameter (None if it can), with the PrimFunc's
    sizes ``solved`` so far."""
    sinfo, buf = item.sinfo, item.buffer
    if isinstance(sinfo, relax.ObjectStructInfo) or sinfo is None:
        return None
    if not isinstance(sinfo, relax.TensorStructInfo):
        return "it takes a tensor"
    if sinfo.dtype and sinfo.dtype != buf.dtype:
        return "dtype differs"
    if sinfo.ndim >= 0 and sinfo.ndim != len(buf.shape):
        return f"{sinfo.ndim}-d vs {len(buf.shape)}-d"
    if sinfo.shape is None:
        return None
    for d, (want, got) in enumerate(zip(buf.shape, sinfo.shape)):
        used = vars_in([want])
        if any(v not in solved for v in used):
            continue  # a size the call does not determine: it is read from what is passed
        expected = substitute(want, {v: solved[v][0] for v in used})
        differ = _contradiction(got, expected)
        if differ is not None:
            whence = "".join(f", where the prim_func's {v.name} is {solved[v][1]}" for v in used[:1])
            whence += "".join(f" and its {v.name} is {solved[v][1]}" for v in used[1:])
            return f"dimension {d}: {_dim_text(got)} vs {_dim_text(expected)}{whence}{differ}"
    return None


def _contradiction(got, want) -> Optional[str]:
    """How dims ``got`` and ``want`` cannot be equal, as a message's ending: "" if they differ
    whatever the sizes in them, ", unequal unless both are 0" if only an empty axis would
    make them equal; None if they may be equal. Sizes are non-negative, as TVM takes Relax's
    symbolic shapes."""
    got, want = widen(got), widen(want)
    ranges = {v: (tir.IntImm(v.dtype, 0), None) for v in vars_in([got, want])}
    simplify = Canonical(ranges).simplify
    diff = simplify(tir.Sub("int64", got, want))
    lo, hi = const_int_bound(diff, ranges)
    if lo > 0 or hi < 0:
        return ""
    # Both at least 1 (a non-empty axis): can one be proved above the other?
    facts = [tir.Sub("int64", e, _ONE) for e in (got, want)]
    for gap in (diff, tir.Sub("int64", tir.IntImm("int64", 0), diff)):
        above = tir.Sub("int64", gap, _ONE)  # gap >= 1
        if any(const_int_bound(simplify(tir.Sub("int64", above, f)), ranges)[0] >= 0 for f in facts):
            return ", unequal unless both are 0"
    return None


_ONE = tir.IntImm("int64", 1)


def _dim_text(d) -> str:
    return printer().dim_text(widen(d))


def _buffer_text(buf: tir.Buffer) -> str:
    return f'T.Buffer({printer().shape_text([widen(d) for d in buf.shape])}, "{buf.dtype}")'


def _sinfo_text(sinfo) -> str:
    return printer().sinfo_text(sinfo)
