"""TVM's ``relax.BlockBuilder``: build Relax functions and IRModules from Python (seed 002 5.3)::

    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)      # prim_func te_matmul + R.call_tir -> lv
            D = bb.emit_te(te_relu, C)           # lv1
            R = bb.emit_output(D)                # gv
        bb.emit_func_output(R, params=[A, B])
    mod = bb.get()

Every emitted value is normalized first: its struct info is inferred (registered ops through the
op registry, ``call_tir`` from its ``out_sinfo``, tuples, constants, calls of module functions).
Variables are named as TVM names them: ``lv``, ``lv1``, ... for bindings, ``gv``, ``gv1``, ... for
outputs of dataflow blocks (unique within a function); module functions are deduplicated by
name (``te_matmul``, ``te_matmul1``) and a prim_func structurally equal to one already added is
reused.
"""

from __future__ import annotations

import string
from contextlib import contextmanager
from typing import Optional

from tvmscript.ir import relax, tir
from tvmscript.ir import GlobalVar, IRModule
from tvmscript.ir.structural import structural_hash

from tvmscript.ir.op import api as _op_api
from tvmscript.ir.op import find_op


class BlockBuilderError(ValueError):
    """A misuse of the BlockBuilder (emit_output outside a dataflow block, two function outputs,
    ...)."""


class _FunctionFrame:
    __slots__ = ("name", "params", "attrs", "private", "pure", "blocks", "output", "names")

    def __init__(self, name, params, attrs, private, pure) -> None:
        self.name = name
        self.params = params
        self.attrs = dict(attrs or {})
        self.private = private
        self.pure = pure
        self.blocks: list = []
        self.output = None  # (params, SeqExpr) once emit_func_output ran
        self.names: dict[str, int] = {}


class _BlockFrame:
    __slots__ = ("dataflow", "bindings", "outputs")

    def __init__(self, dataflow: bool) -> None:
        self.dataflow = dataflow
        self.bindings: list = []
        self.outputs: list = []


class BlockBuilder:
    """Builds an IRModule step by step; see the module docstring."""

    _current: Optional["BlockBuilder"] = None

    def __init__(self, mod: IRModule | None = None) -> None:
        self._mod = mod.copy() if mod is not None else IRModule()
        self._func: Optional[_FunctionFrame] = None
        self._block: Optional[_BlockFrame] = None
        self._names: dict[str, int] = {}  # variable names outside functions
        self._global_names: dict[str, int] = {}
        self._hashes: Optional[dict] = None  # see _prim_func_index

    @staticmethod
    def current() -> Optional["BlockBuilder"]:
        return BlockBuilder._current

    # ------------------------------------------------------------------ scopes
    @contextmanager
    def function(self, name: str, params=None, attrs: dict | None = None, private: bool = False,
                 pure: bool = True):
        """``with bb.function("main", params=None, attrs=None, private=False):`` — the body must
        end with `emit_func_output`. ``params`` may instead be given there."""
        if self._func is not None:
            raise BlockBuilderError("bb.function() scopes cannot be nested")
        if params is not None:
            params = self._check_params(params)
        self._func = _FunctionFrame(name, params, attrs, private, pure)
        prev, BlockBuilder._current = BlockBuilder._current, self
        ok = False
        try:
            yield self
            ok = True
        finally:
            BlockBuilder._current = prev
            frame, self._func = self._func, None
            if ok:
                self._block = None
                if frame.output is None:
                    raise BlockBuilderError(
                        f"emit_func_output must be called in bb.function({name!r}) before its scope ends")
                self._finish_function(frame)
            else:
                self._block = None

    @contextmanager
    def dataflow(self):
        """``with bb.dataflow():`` — bindings emitted inside go to a dataflow block; values used
        after it must go through `emit_output`."""
        if self._func is None:
            raise BlockBuilderError("bb.dataflow() must be inside bb.function()")
        if self._func.output is not None:
            raise BlockBuilderError("bb.dataflow() after emit_func_output")
        if self._block is not None and self._block.dataflow:
            raise BlockBuilderError("bb.dataflow() blocks cannot be nested")
        self._end_block()
        self._block = _BlockFrame(True)
        ok = False
        try:
            yield self
            ok = True
        finally:
            block, self._block = self._block, None
            if ok and block is not None and block.bindings:
                self._func.blocks.append(relax.DataflowBlock(block.bindings, block.outputs))

    def _end_block(self) -> None:
        if self._block is not None and not self._block.dataflow:
            if self._block.bindings and self._func is not None:
                self._func.blocks.append(relax.BindingBlock(self._block.bindings))
            self._block = None

    # ------------------------------------------------------------------ names
    def _fresh_name(self, hint: str) -> str:
        table = self._func.names if self._func is not None else self._names
        if hint not in table:
            table[hint] = 0
            return hint
        n = table[hint]
        while True:
            n += 1
            cand = f"{hint}{n}"
            if cand not in table:
                table[hint] = n
                table[cand] = 0
                return cand

    def _reserve(self, name: str) -> None:
        table = self._func.names if self._func is not None else self._names
        table.setdefault(name, 0)

    def _global_name(self, hint: str) -> str:
        n = 0
        name = hint
        while name in self._mod:
            n += 1
            name = f"{hint}{n}"
        return name

    # ------------------------------------------------------------------ emitting
    def normalize(self, expr):
        """The expression with struct info filled in (and Python values turned into Relax
        expressions); raises ValueError for ill-typed op calls."""
        return self._flatten(self._normalize(_op_api.to_expr(expr, "value")))

    def _normalize(self, e):
        if isinstance(e, GlobalVar):
            return e
        if isinstance(e, relax.Var):
            _op_api.fix_legacy_var(e)
            return e
        if isinstance(e, relax.Tuple):
            fields = [self._normalize(_op_api.to_expr(f)) for f in e.fields]
            if e.struct_info is None or any(f is not g for f, g in zip(fields, e.fields)):
                return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
            return e
        if isinstance(e, relax.Call) and e.struct_info is None:
            args = [self._normalize(_op_api.to_expr(a)) for a in e.args]
            if isinstance(e.op, relax.Op):
                op = find_op(e.op.name)
                if op is not None:
                    call = _op_api.make_op_call(op, args, dict(e.attrs))
                    call.span = e.span
                    return call
                if e.op.name in ("relax.call_tir", "relax.call_dps_packed") and e.sinfo_args:
                    sinfos = [_op_api.canonical_sinfo(s) for s in e.sinfo_args]
                    ret = sinfos[0] if len(sinfos) == 1 else relax.TupleStructInfo(sinfos)
                    return relax.Call(e.op, args, e.attrs, sinfos, ret, e.span)
                ret = e.sinfo_args[0] if e.sinfo_args else relax.ObjectStructInfo()
                return relax.Call(e.op, args, e.attrs, e.sinfo_args, ret, e.span)
            ret = relax.ObjectStructInfo()
            callee = e.op
            if isinstance(callee, GlobalVar) and callee in self._mod:
                f = self._mod[callee]
                if isinstance(f, relax.Function) and f.ret_struct_info is not None:
                    ret = f.ret_struct_info
            elif isinstance(relax.struct_info_of(callee), relax.FuncStructInfo):
                ret = relax.struct_info_of(callee).ret or ret
            return relax.Call(callee, args, e.attrs, e.sinfo_args, ret, e.span)
        if isinstance(e, relax.TupleGetItem) and e.struct_info is None:
            tup = self._normalize(e.tuple_value)
            ts = relax.struct_info_of(tup)
            sinfo = relax.ObjectStructInfo()
            if isinstance(ts, relax.TupleStructInfo):
                if not 0 <= e.index < len(ts.fields):
                    raise ValueError(f"tuple index {e.index} is out of range for a tuple of {len(ts.fields)} fields")
                sinfo = ts.fields[e.index]
            return relax.TupleGetItem(tup, e.index, sinfo)
        if isinstance(e, relax.ShapeExpr) and e.struct_info is None:
            vals = _op_api._dims(e.values)
            return relax.ShapeExpr(vals, relax.ShapeStructInfo(vals))
        if isinstance(e, relax.Constant) and e.struct_info is None:
            return relax.Constant(e.data, relax.tensor_sinfo(list(e.data.shape), str(e.data.dtype)))
        if isinstance(e, relax.PrimValue) and e.struct_info is None:
            v = e.value
            if isinstance(v, int):
                v = tir.IntImm("int64", v)
            return relax.PrimValue(v, relax.PrimStructInfo(v.dtype, v))
        if isinstance(e, relax.StringImm) and e.struct_info is None:
            return relax.StringImm(e.value, relax.ObjectStructInfo())
        return e

    def _flatten(self, e):
        """``e`` with its operands as TVM's normalizer leaves them: a call nested in another
        expression is bound to a fresh variable first (``lv``/``gv``, as ``emit`` names them),
        so what the builder makes prints, and reads back, as TVM's builder makes it. Outside a
        function there is no block to bind into, and the expression stays nested."""
        if self._func is None:
            return e
        if isinstance(e, relax.Call):
            args = [self._leaf(a) for a in e.args]
            if any(a is not b for a, b in zip(args, e.args)):
                return relax.Call(e.op, args, e.attrs, e.sinfo_args, e.struct_info, e.span)
        elif isinstance(e, relax.Tuple):
            fields = [self._leaf(f) for f in e.fields]
            if any(a is not b for a, b in zip(fields, e.fields)):
                return relax.Tuple(fields, e.struct_info)
        elif isinstance(e, relax.TupleGetItem):
            tup = self._leaf(e.tuple_value)
            if tup is not e.tuple_value:
                return relax.TupleGetItem(tup, e.index, e.struct_info)
        return e

    def _leaf(self, e):
        if not relax.is_leaf(e):
            return self.emit(e)
        return self._flatten(e) if isinstance(e, relax.Tuple) else e

    def _current_block(self) -> _BlockFrame:
        if self._block is None:
            self._block = _BlockFrame(False)
        return self._block

    def emit(self, expr, name_hint: str = ""):
        """Bind ``expr`` (normalized) to a fresh variable — a DataflowVar inside ``bb.dataflow()``,
        else a Var — named ``name_hint`` or ``lv``, ``lv1``... and return the variable."""
        value = self.normalize(expr)
        block = self._current_block()
        name = self._fresh_name(name_hint or ("lv" if block.dataflow else "gv"))
        cls = relax.DataflowVar if block.dataflow else relax.Var
        var = cls(name, relax.struct_info_of(value))
        block.bindings.append(relax.VarBinding(var, value))
        return var

    def match_cast(self, value, struct_info, name_hint: str = ""):
        """``lv = R.match_cast(value, struct_info)``."""
        value = self.normalize(value)
        sinfo = _op_api.canonical_sinfo(struct_info)
        block = self._current_block()
        cls = relax.DataflowVar if block.dataflow else relax.Var
        var = cls(self._fresh_name(name_hint or "lv"), sinfo)
        block.bindings.append(relax.MatchCast(var, value, sinfo))
        return var

    def emit_output(self, output, name_hint: str = ""):
        """Inside ``bb.dataflow()``: bind ``output`` (a variable or expression; a list/tuple
        becomes a Tuple) to a Var named ``gv``, ``gv1``... visible after the block."""
        if self._block is None or not self._block.dataflow:
            raise BlockBuilderError("emit_output can only be called inside a bb.dataflow() block")
        if isinstance(output, (list, tuple)):
            output = relax.Tuple(list(output))
        value = self.normalize(output)
        var = relax.Var(self._fresh_name(name_hint or "gv"), relax.struct_info_of(value))
        self._block.bindings.append(relax.VarBinding(var, value))
        self._block.outputs.append(var)
        return var

    def emit_func_output(self, output, params=None):
        """End the function: ``output`` (expression, or a list/tuple of them) is what it returns;
        ``params`` its parameters when not given to ``bb.function()``. Once per function."""
        f = self._func
        if f is None:
            raise BlockBuilderError("emit_func_output must be called inside bb.function()")
        if f.output is not None:
            raise BlockBuilderError("emit_func_output has already been called for this function")
        if self._block is not None and self._block.dataflow:
            raise BlockBuilderError("emit_func_output cannot be called inside a dataflow block")
        if params is not None:
            if f.params is not None:
                raise BlockBuilderError("function parameters were already given to bb.function()")
            f.params = self._check_params(params)
        if f.params is None:
            f.params = []
        if isinstance(output, (list, tuple)):
            output = relax.Tuple(list(output))
        body = self.normalize(output)
        self._end_block()
        f.output = relax.SeqExpr(list(f.blocks), body, relax.struct_info_of(body))
        return body

    def _check_params(self, params) -> list:
        if isinstance(params, relax.Var):
            params = [params]
        out = []
        for p in params:
            if not isinstance(p, relax.Var) or isinstance(p, relax.DataflowVar):
                raise BlockBuilderError(f"function parameters must be relax.Var, not {type(p).__name__}")
            _op_api.fix_legacy_var(p)
            out.append(p)
        return out

    def _finish_function(self, f: _FunctionFrame) -> None:
        attrs = dict(f.attrs)
        name = self._global_name(f.name)
        if not f.private:
            attrs.setdefault("global_symbol", name)
        seq = f.output
        ret = relax.struct_info_of(seq.body)
        func = relax.Function(list(f.params), seq, ret, attrs, f.pure, f.private)
        self._mod[name] = func

    # ------------------------------------------------------------------ module functions
    def add_func(self, func, func_name: str) -> GlobalVar:
        """Add ``func`` (a prim_func or Relax function) to the module under ``func_name`` (made
        unique: ``name``, ``name1``...); a prim_func equal to one already there is reused."""
        from tvmscript.ir import structural_equal

        if isinstance(func, tir.PrimFunc) and "global_symbol" not in func.attrs and not func.private:
            # Without a global symbol a module function is private (TVM prints private=True).
            import copy

            func = copy.copy(func)
            func.private = True
        key = None
        if isinstance(func, tir.PrimFunc):
            # Candidates share a structural hash; structural_equal confirms (legalizing a big
            # model adds hundreds of PrimFuncs: comparing each with all would be quadratic).
            bare = _strip_symbol(func)
            key = structural_hash(bare)
            for gv in self._prim_func_index().get(key, ()):
                existing = self._mod.functions.get(gv)
                if isinstance(existing, tir.PrimFunc) and structural_equal(_strip_symbol(existing), bare):
                    return gv
        name = self._global_name(func_name)
        if isinstance(func, relax.Function) and not func.private:
            func.attrs = dict(func.attrs)
            func.attrs["global_symbol"] = name
        gv = GlobalVar(name)
        self._mod[gv] = func
        if key is not None:
            self._prim_func_index().setdefault(key, []).append(gv)
        return gv

    def _prim_func_index(self) -> dict:
        """{structural hash: [GlobalVar]} of the module's PrimFuncs, built on first use."""
        if self._hashes is None:
            self._hashes = {}
            for gv, f in self._mod.functions.items():
                if isinstance(f, tir.PrimFunc):
                    self._hashes.setdefault(structural_hash(_strip_symbol(f)), []).append(gv)
        return self._hashes

    def update_func(self, gv: GlobalVar, func) -> None:
        if isinstance(func, tir.PrimFunc) or isinstance(self._mod.functions.get(gv), tir.PrimFunc):
            self._hashes = None
        self._mod[gv] = func

    def get(self) -> IRModule:
        """The module built so far (functions still being built are not in it)."""
        return self._mod

    finalize = get

    # ------------------------------------------------------------------ TE
    def call_te(self, func, *args, **kwargs) -> relax.Call:
        """The ``R.call_tir`` that `emit_te` emits, without emitting it."""
        from . import te

        primfunc_name_hint = kwargs.pop("primfunc_name_hint", None)
        kwargs.pop("name_hint", None)
        inputs: list = []
        call_args: list = []

        def convert(arg):
            if isinstance(arg, relax.Expr):
                arg = self.normalize(arg)
                sinfo = relax.struct_info_of(arg)
                if isinstance(sinfo, relax.TensorStructInfo):
                    if sinfo.shape is None:
                        raise ValueError("emit_te needs arguments whose shapes are known")
                    n = len(inputs)
                    if isinstance(arg, relax.Var):
                        name = arg.name_hint
                    elif n < len(string.ascii_uppercase):
                        name = string.ascii_uppercase[n]
                    else:
                        name = f"tensor_input_{n}"
                    # Relax dims are int64 (T.int64(128) in the PrimFunc), as in TVM.
                    ph = te.placeholder(tuple(sinfo.shape), sinfo.dtype or "float32", name=name)
                    inputs.append(ph)
                    call_args.append(arg)
                    return ph
                if isinstance(arg, relax.ShapeExpr):
                    return [d.value if isinstance(d, tir.IntImm) else d for d in arg.values]
                if isinstance(arg, relax.PrimValue):
                    return arg.value
                raise ValueError(f"emit_te cannot pass a {type(sinfo).__name__} argument to TE")
            if isinstance(arg, list):
                return [convert(a) for a in arg]
            if isinstance(arg, tuple):
                return tuple(convert(a) for a in arg)
            if isinstance(arg, dict):
                return {k: convert(v) for k, v in arg.items()}
            return arg

        te_args = [convert(a) for a in args]
        te_kwargs = {k: convert(v) for k, v in kwargs.items()}
        out = func(*te_args, **te_kwargs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        unbound = _unbound_tir_vars(inputs, outs, [te_args, te_kwargs])
        prim = te.create_prim_func(inputs + outs + unbound)
        gv = self.add_func(prim, primfunc_name_hint or getattr(func, "__name__", "te_func"))
        out_sinfo = [relax.TensorStructInfo(_op_api._dims(o.shape), str(o.dtype)) for o in outs]
        return _op_api.call_tir(gv, call_args, out_sinfo if isinstance(out, (list, tuple)) else out_sinfo[0],
                                tir_vars=unbound or None)

    def emit_te(self, func, *args, **kwargs):
        """Run the TE function ``func`` on placeholders for the Relax tensor arguments, add the
        prim_func (``te.create_prim_func(inputs + outputs)``) to the module as ``func.__name__``
        (deduplicated) and emit ``R.call_tir`` of it; returns the bound variable."""
        name_hint = kwargs.pop("name_hint", "")
        return self.emit(self.call_te(func, *args, **kwargs), name_hint)


def _unbound_tir_vars(inputs: list, outs: list, te_args: list) -> list:
    """The symbolic sizes a TE computation uses that no input's shape binds: an output of shape
    ``(n // 2,)`` from ``R.full``, an ``R.arange(0, n - 1)``. They become scalar parameters of
    the prim_func and the call's ``tir_vars=R.shape([n])``, as TVM's call_te passes them."""
    from tvmscript.ir.tir_visitor import vars_in

    bound = {d for t in inputs for d in t.shape if isinstance(d, tir.Var)}
    used: list = []

    def collect(value) -> None:
        if isinstance(value, tir.PrimExpr):
            used.extend(vars_in([value]))
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)

    collect([list(o.shape) for o in outs])
    collect(te_args)
    unbound: list = []
    for v in used:
        if v not in bound and v not in unbound and tir.is_int(v.dtype):
            unbound.append(v)
    return unbound


def _strip_symbol(f):
    if "global_symbol" not in f.attrs:
        return f
    import copy

    g = copy.copy(f)
    g.attrs = {k: v for k, v in f.attrs.items() if k != "global_symbol"}
    return g
