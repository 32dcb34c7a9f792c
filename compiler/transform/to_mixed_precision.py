"""ToMixedPrecision: a float32 model's matmuls and convolutions computed in half precision with
float32 accumulation, as TVM's ``relax.transform.ToMixedPrecision(out_dtype="float32",
fp16_input_names=None)`` does.

Why: a GPU's tensor cores multiply float16 (or bfloat16) operands several times faster than
float32 ones, and half-width tensors halve the memory traffic. The products are where the time
goes, so they run in half precision. The statistics that float16 gets wrong (softmax,
normalizations, reductions) stay in float32.

What it does, per Relax function, inside its dataflow blocks (as TVM, other blocks are left
as they are). Each op call follows its policy
(``tvmscript/ir/op/mixed_precision.py``, TVM's ``TMixedPrecisionPolicy``):

- ``ALWAYS`` (convolutions, matmul): its float operands are cast to the half dtype and it runs
  with ``out_dtype=out_dtype``, the accumulator's dtype. Inside the block the result is kept
  in half (``R.astype``; FuseOps fuses the cast into the kernel as its epilogue). This applies
  when at least one float operand is float32, so products the model already computes in half
  are left as written.
- ``FOLLOW`` (elementwise arithmetic, activations, layout and shape ops, pooling): the op runs
  in half when every float operand is half already, or is a float32 constant whose values
  fit the half dtype. Otherwise its half operands are cast back up to float32. ``R.astype``
  reads its operand in whatever dtype it arrives.
- ``NEVER`` (everything else: softmax, normalizations, reductions...): operands are cast back
  to their original dtypes.

A backward pass first finds the values worth storing in half: those whose every use is an
``ALWAYS`` operand (`_HalfOnlyUses`). Such a value is cast once where it is defined, or at the
top of each block for a parameter, instead of at every use. A value also used elsewhere is
cast at each ``ALWAYS`` use, so casts do not go back and forth. The function's parameters and
results keep their dtypes, except the parameters named in ``fp16_input_names``, whose
signature becomes half (TVM's name, whatever the half dtype). A float32 constant the pass
narrows is written ``R.astype(constant, "float16")``. ``tvms.compile``'s default pipeline
(LegalizeOps, then FoldConstant) turns that into a float16 constant at compile time.

Where tvms differs from TVM, on purpose:

- ``out_dtype="float16"``: TVM runs the ``ALWAYS`` op with a float16 accumulator. Here it still
  accumulates in float32 and its result is cast to float16 at once (the cast is the fused
  kernel's epilogue): float16 storage and float16 results, without the error of a float16
  running sum. The only change from ``out_dtype="float32"`` is then a function result that an
  ``ALWAYS`` op computes: it is rounded to float16 before it is cast back to float32, as TVM
  would round it.
- ``dtype="bfloat16"`` (a tvms extension, TVM has no such keyword) uses bfloat16 as the half
  dtype; ``dtype="float16"`` is the default and TVM's behaviour.
- A ``FOLLOW`` op's integer or bool operands (indices, masks) do not decide its dtype. TVM
  computes such an op in float32 unless those operands are float16 too.
- A float32 constant counts as fitting float16 when its finite values do (infinities and NaN
  exist in float16 too; TVM refuses them).
- The op table differs in a few places (see its docstring): normalizations and attention stay
  float32, and pure data-movement ops follow.
"""

from __future__ import annotations

import numpy as np

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.op import api as op
from tvmscript.ir.op.mixed_precision import ALWAYS, FOLLOW, NEVER, mixed_precision_policy

from ._common import substitute_relax, walk_relax
from ._rewrite_calls import CallRewriter, _give_span, rewrite_functions
from ..block_builder import _BlockFrame

HALF_DTYPES = ("float16", "bfloat16")
_FULL = "float32"
# The largest finite value each half dtype holds.
_HALF_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}


class ToMixedPrecision:
    """``IRModule -> IRModule``: every Relax function's dataflow blocks rewritten so that its
    ``ALWAYS`` ops compute in ``dtype`` with an ``out_dtype`` accumulator (see the module
    docstring). ``fp16_input_names``: parameters (by name, in every function) whose dtype
    becomes ``dtype`` in the signature."""

    def __init__(self, out_dtype: str = "float32", fp16_input_names=None, dtype: str = "float16") -> None:
        if dtype not in HALF_DTYPES:
            raise ValueError(f"ToMixedPrecision: dtype must be one of {', '.join(HALF_DTYPES)}, not {dtype!r}")
        if out_dtype not in (_FULL, dtype):
            raise ValueError(f"ToMixedPrecision: out_dtype must be {_FULL!r} or {dtype!r}, not {out_dtype!r}")
        self.out_dtype = out_dtype
        self.dtype = dtype
        self.fp16_input_names = frozenset(fp16_input_names or ())

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, lambda bb: _Rewriter(bb, self))

    def __repr__(self) -> str:
        args = [f"out_dtype={self.out_dtype!r}"]
        if self.fp16_input_names:
            args.append(f"fp16_input_names={sorted(self.fp16_input_names)!r}")
        if self.dtype != "float16":
            args.append(f"dtype={self.dtype!r}")
        return f"ToMixedPrecision({', '.join(args)})"


# ----------------------------------------------------------------------------- dtypes


def _leaf_dtypes(sinfo):
    """A value's dtypes, nested as its struct info: a tensor's dtype, a list for a tuple, None
    for anything else."""
    if isinstance(sinfo, relax.TensorStructInfo):
        return sinfo.dtype
    if isinstance(sinfo, relax.TupleStructInfo):
        return [_leaf_dtypes(f) for f in sinfo.fields]
    return None


def _uniform(sinfo, leaf):
    """``leaf`` at every tensor of a value shaped as ``sinfo``."""
    if isinstance(sinfo, relax.TupleStructInfo):
        return [_uniform(f, leaf) for f in sinfo.fields]
    return leaf if isinstance(sinfo, relax.TensorStructInfo) else None


def _fits(const: relax.Constant, half: str) -> bool:
    """Whether a constant's finite values are within the half dtype's range."""
    data = np.asarray(const.data, dtype=np.float64)
    finite = data[np.isfinite(data)]
    return finite.size == 0 or float(np.abs(finite).max()) <= _HALF_MAX[half]


def _float_leaves(expr, half: str, out: list) -> list:
    """The float32 and half tensors an operand holds, as (expression, dtype) pairs; a tuple
    literal's fields are looked into, a tuple value's fields are its items."""
    if isinstance(expr, relax.Tuple):
        for f in expr.fields:
            _float_leaves(f, half, out)
        return out
    dtypes = _leaf_dtypes(relax.struct_info_of(expr))
    stack = [dtypes]
    while stack:
        d = stack.pop()
        if isinstance(d, list):
            stack.extend(d)
        elif d in (_FULL, half):
            out.append((expr, d))
    return out


# ----------------------------------------------------------------------------- the analysis


class _Policy:
    """The policy a call is rewritten by, read from the program as written: the table's, except
    that an `ALWAYS` op counts as `NEVER` unless it has an ``out_dtype`` to set, its float
    operands are all float32 or half, and one of them is float32 (the analysis and the
    rewrite ask the same question of the same call)."""

    def __init__(self, half: str) -> None:
        self.half = half

    def of(self, call) -> str | None:
        """The policy of an op call, None for anything else."""
        if not (isinstance(call, relax.Call) and isinstance(call.op, relax.Op)):
            return None
        policy = mixed_precision_policy(call.op.name)
        if policy == ALWAYS and not self.narrows(call):
            return NEVER
        return policy

    def narrows(self, call: relax.Call) -> bool:
        if "out_dtype" not in (call.attrs or {}):
            return False
        dtypes = []
        for a in call.args:
            d = _leaf_dtypes(relax.struct_info_of(a))
            if isinstance(d, str):
                dtypes.append(d)
            elif d is not None:
                return False  # a tuple operand
        if "" in dtypes:
            return False  # a dtype unknown
        floats = [d for d in dtypes if d.startswith("float") or d == "bfloat16"]
        return _FULL in floats and all(d in (_FULL, self.half) for d in floats)


_HALF, _ANY = "half", "any"  # what a value's uses need: half only, or anything


class _HalfOnlyUses:
    """Which values of a function are only ever used as operands of `ALWAYS` ops (so they can
    be stored in half where they are defined), found walking the bindings backwards.

    ``needs[var]`` is nested as the variable's struct info: per tensor, ``"half"`` when every use
    takes it in half, ``"any"`` when some use needs its own dtype, None when unused. A tuple
    built in a dataflow block, or read there by index, passes its fields' needs on."""

    def __init__(self, func: relax.Function, policy: _Policy) -> None:
        self.policy = policy
        self.needs: dict = {}
        self.seq(func.body)

    def half_only(self, var):
        """The nested needs of ``var`` (None when nothing is known)."""
        return self.needs.get(var)

    def seq(self, seq: relax.SeqExpr) -> None:
        self.require_all(seq.body)
        for block in reversed(seq.blocks):
            dataflow = isinstance(block, relax.DataflowBlock)
            for binding in reversed(block.bindings):
                self.binding(binding, dataflow)

    def binding(self, binding, dataflow: bool) -> None:
        value = binding.value
        if isinstance(binding, relax.MatchCast) or not dataflow:
            if isinstance(value, relax.If):
                self.require_all(value.cond)
                self.seq(value.true_branch)
                self.seq(value.false_branch)
            else:
                self.require_all(value)
        elif self.policy.of(value) == ALWAYS:
            for a in value.args:
                self.require(a, _uniform(relax.struct_info_of(a), _HALF))
        elif isinstance(value, relax.Tuple):
            wanted = self.needs.get(binding.var) or [None] * len(value.fields)
            for f, w in zip(value.fields, wanted):
                self.require(f, w)
        elif isinstance(value, relax.TupleGetItem):
            sinfo = relax.struct_info_of(value.tuple_value)
            if isinstance(sinfo, relax.TupleStructInfo):
                wanted = [None] * len(sinfo.fields)
                wanted[value.index] = self.needs.get(binding.var)
                self.require(value.tuple_value, wanted)
        else:
            self.require_all(value)

    def require_all(self, expr) -> None:
        """Every variable ``expr`` uses needs its own dtype."""
        def visit(n):
            if isinstance(n, relax.Var):
                self.require(n, _uniform(n.struct_info, _ANY))
        walk_relax(expr, visit)

    def require(self, expr, need) -> None:
        if isinstance(expr, relax.Var):
            self.needs[expr] = _merge(self.needs.get(expr), need)
        elif isinstance(expr, relax.Tuple) and isinstance(need, list):
            for f, w in zip(expr.fields, need):
                self.require(f, w)
        elif isinstance(expr, relax.Tuple):
            for f in expr.fields:
                self.require(f, _uniform(relax.struct_info_of(f), need))


def _merge(a, b):
    """Two needs of one value together: ``any`` wins over ``half``, which wins over None."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(x, y) for x, y in zip(a, b)]
    if isinstance(a, list) or isinstance(b, list):
        return _ANY
    return _ANY if _ANY in (a, b) else _HALF


# ----------------------------------------------------------------------------- the rewrite


class _Rewriter(CallRewriter):
    """Rewrites one function at a time, binding by binding. ``local`` maps a variable of the
    current dataflow block to the one holding its value in its new dtype; ``params`` maps
    the parameters whose signature became half to their new variables."""

    def __init__(self, bb, config: ToMixedPrecision) -> None:
        super().__init__(bb)
        self.half = config.dtype
        self.acc = _FULL
        self.round_results = config.out_dtype == config.dtype
        self.fp16_input_names = config.fp16_input_names
        self.policy = _Policy(self.half)
        self.local: dict = {}
        self.params: dict = {}
        self.original_params: list = []
        self.uses = None

    # ---- function, blocks, bindings

    def function(self, func: relax.Function) -> relax.Function:
        self.uses = _HalfOnlyUses(func, self.policy)
        self.params = {p: self.half_param(p) for p in func.params
                       if p.name_hint in self.fp16_input_names and _leaf_dtypes(p.struct_info) != self.half}
        self.changed = bool(self.params)
        self.original_params = list(func.params)
        return super().function(func, [self.params.get(p, p) for p in func.params])

    def half_param(self, param: relax.Var) -> relax.Var:
        sinfo = param.struct_info
        if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.dtype != _FULL:
            raise ValueError(f"ToMixedPrecision: fp16_input_names names parameter '{param.name_hint}', "
                             f"which is not a float32 or {self.half} tensor")
        return relax.Var(param.name_hint, relax.TensorStructInfo(sinfo.shape, self.half, sinfo.ndim, sinfo.vdevice),
                         param.span)

    def seq(self, seq: relax.SeqExpr) -> relax.SeqExpr:
        blocks = [self.block(b) for b in seq.blocks]
        body = seq.body
        if isinstance(body, relax.If):
            body = self.if_(body)
        elif self.params and self.uses_remapped(body):
            # A half parameter returned as it is: read back in float32 in a block of its own.
            frame = _BlockFrame(False)
            self.bb._block = frame
            body = self.bb.normalize(self.restore_vars(body))
            self.bb._block = None
            blocks.append(relax.BindingBlock(frame.bindings))
        if body is seq.body and len(blocks) == len(seq.blocks) and all(a is b for a, b in zip(blocks, seq.blocks)):
            return seq
        return relax.SeqExpr(blocks, body, seq.struct_info)

    def block(self, block: relax.BindingBlock) -> relax.BindingBlock:
        dataflow = isinstance(block, relax.DataflowBlock)
        frame = _BlockFrame(dataflow)
        self.bb._block = frame
        self.local = {}
        if dataflow:
            used = set()
            walk_relax(block, lambda n: used.add(n) if isinstance(n, relax.Var) else None)
            for p in self.original_params:
                if p in used:
                    self.store_half_only(p)
        for binding in block.bindings:
            self.binding(binding) if dataflow else self.plain_binding(binding)
            self.bb._block = frame
        self.bb._block = None
        self.local = {}
        if len(frame.bindings) == len(block.bindings) and all(a is b for a, b in zip(frame.bindings, block.bindings)):
            return block
        if dataflow:
            return relax.DataflowBlock(frame.bindings, list(block.outputs))
        return relax.BindingBlock(frame.bindings)

    def plain_binding(self, binding) -> None:
        """A binding outside dataflow blocks: only the half parameters are read back, and the
        dataflow blocks of an ``R.If``'s branches are rewritten."""
        frame, value = self.bb._block, binding.value
        if isinstance(value, relax.If):
            branches = (self.restore_vars(value.cond), self.seq(value.true_branch), self.seq(value.false_branch))
            if any(a is not b for a, b in zip(branches, (value.cond, value.true_branch, value.false_branch))):
                value = relax.If(*branches, value.struct_info)
            self.bb._block, self.local = frame, {}
        elif self.uses_remapped(value):
            value = self.bb.normalize(self.restore_vars(value))
        self.append(binding, value)

    def binding(self, binding) -> None:
        value = binding.value
        if isinstance(binding, relax.MatchCast) or isinstance(value, relax.If):
            new = self.restore_vars(value)
        else:
            policy = self.policy.of(value)
            if policy == ALWAYS:
                new = self.always(value, binding.var)
            elif policy == FOLLOW:
                new = self.follow(value)
            elif policy == NEVER:
                new = self.never(value)
            elif isinstance(value, relax.Tuple):
                new = self.current(value)
            elif isinstance(value, relax.TupleGetItem):
                tup = self.current(value.tuple_value)
                new = value if tup is value.tuple_value else relax.TupleGetItem(tup, value.index)
            else:
                new = self.restore_vars(value)
        self.bind(binding, new, getattr(value, "span", None))
        self.store_half_only(binding.var)

    def bind(self, binding, value, span) -> None:
        """Append ``binding`` with its new value. A variable seen after the block keeps its
        dtype (a cast back if needed); a dataflow variable takes the value's new dtype."""
        if value is binding.value:
            self.bb._block.bindings.append(binding)
            return
        self.changed = True
        emitted = len(self.bb._block.bindings)
        value = self.bb.normalize(value)
        var = binding.var
        old = _leaf_dtypes(var.struct_info)
        if _leaf_dtypes(relax.struct_info_of(value)) != old:
            if isinstance(var, relax.DataflowVar) and not isinstance(binding, relax.MatchCast):
                new_var = relax.DataflowVar(var.name_hint, relax.struct_info_of(value), var.span)
                self.local[var] = new_var
                var = new_var
            else:
                value = self.bb.normalize(self.cast(self.bb.emit(value), old))
        for b in self.bb._block.bindings[emitted:]:
            _give_span(b.value, span)
        _give_span(value, span)
        self.append(binding, value, var)

    def append(self, binding, value, var=None) -> None:
        var = var or binding.var
        if value is binding.value and var is binding.var:
            self.bb._block.bindings.append(binding)
            return
        self.changed = True
        if isinstance(binding, relax.MatchCast):
            self.bb._block.bindings.append(relax.MatchCast(var, value, binding.struct_info))
        else:
            self.bb._block.bindings.append(relax.VarBinding(var, value))

    def store_half_only(self, var) -> None:
        """Cast ``var`` to half once, where it is defined, when every use takes it in half."""
        need = self.uses.half_only(var)
        if need is None:
            return
        cur = self.current(var)
        to = _targets(need, _HALF, self.half)
        cast = self.cast(cur, to)
        if cast is not cur:
            self.changed = True
            self.local[var] = self.bb.emit(cast)

    # ---- the three policies

    def always(self, call: relax.Call, var):
        args = [self.cast(self.current(a), _uniform(relax.struct_info_of(a), self.half)) for a in call.args]
        attrs = dict(call.attrs)
        attrs["out_dtype"] = self.acc
        out = self.bb.normalize(relax.Call(call.op, args, attrs, call.sinfo_args, span=call.span))
        if isinstance(var, relax.DataflowVar) or self.round_results:
            out = op.astype(out, self.half)
        return out

    def follow(self, call: relax.Call):
        args = [self.current(a) for a in call.args]
        if call.op.name == "relax.astype":  # a cast reads any dtype
            target = None
        else:
            leaves = [leaf for a in args for leaf in _float_leaves(a, self.half, [])]
            half = all(d == self.half or (isinstance(e, relax.Constant) and _fits(e, self.half)) for e, d in leaves)
            target = self.half if half else _FULL
        if target is not None:
            args = [self.cast(a, _uniform(relax.struct_info_of(a), target)) for a in args]
        if all(a is b for a, b in zip(args, call.args)):
            return call
        return relax.Call(call.op, args, call.attrs, call.sinfo_args, span=call.span)

    def never(self, call: relax.Call):
        args = [self.restore(a) for a in call.args]
        if all(a is b for a, b in zip(args, call.args)):
            return call
        return relax.Call(call.op, args, call.attrs, call.sinfo_args, span=call.span)

    # ---- values and casts

    def current(self, expr):
        """``expr`` reading each variable in its new dtype."""
        if isinstance(expr, relax.Var):
            return self.local.get(expr) or self.params.get(expr) or expr
        if isinstance(expr, relax.Tuple):
            fields = [self.current(f) for f in expr.fields]
            if any(a is not b for a, b in zip(fields, expr.fields)):
                return relax.Tuple(fields)
        return expr

    def restore(self, expr):
        """``expr`` in the dtypes it had before the pass."""
        return self.cast(self.current(expr), _leaf_dtypes(relax.struct_info_of(expr)))

    def uses_remapped(self, expr) -> bool:
        found = []
        walk_relax(expr, lambda n: found.append(n) if n in self.local or n in self.params else None)
        return bool(found)

    def restore_vars(self, expr):
        """``expr`` with every variable in a new dtype read back in its own (a cast emitted
        before)."""
        if isinstance(expr, relax.Var):
            return self.restore(expr)
        used = []
        walk_relax(expr, lambda n: used.append(n) if isinstance(n, relax.Var) else None)
        mapping = {}
        for v in dict.fromkeys(used):
            if v in self.local or v in self.params:
                restored = self.restore(v)
                mapping[v] = restored if isinstance(restored, relax.Var) else self.bb.emit(restored)
        return substitute_relax(expr, mapping) if mapping else expr

    def cast(self, expr, to):
        """``expr`` with its float32 and half tensors cast to the dtypes ``to`` (nested as its
        struct info; None leaves a tensor as it is); ``expr`` itself when nothing changes."""
        sinfo = relax.struct_info_of(expr)
        if isinstance(sinfo, relax.TensorStructInfo):
            if isinstance(to, str) and sinfo.dtype in (_FULL, self.half) and sinfo.dtype != to:
                return op.astype(expr, to)
            return expr
        if not isinstance(sinfo, relax.TupleStructInfo) or not isinstance(to, list):
            return expr
        if isinstance(expr, relax.Tuple):
            items = expr.fields
        else:
            items = [relax.TupleGetItem(expr, i, f) for i, f in enumerate(sinfo.fields)]
        fields = [self.cast(item, t) for item, t in zip(items, to)]
        if all(a is b for a, b in zip(fields, items)):
            return expr
        return relax.Tuple(fields)


def _targets(need, when: str, dtype: str):
    """The cast targets for a nested need: ``dtype`` where the need is ``when``, else None."""
    if isinstance(need, list):
        return [_targets(n, when, dtype) for n in need]
    return dtype if need == when else None
