"""The ``T.*`` calls of TensorIR expressions: casts, selects, min/max, the runtime's builtins,
ramps and broadcasts, externs and LLVM intrinsics. One handler per name, in `EXPR_CALLS`, the
table a new intrinsic is added to; `PrimFuncBuilder._call` (tir_expressions.py) dispatches to it.
"""

from __future__ import annotations

from ..ir import tir
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .tir_builder import PrimFuncBuilder


def _call_args(b: PrimFuncBuilder, node, name, params, defaults=None):
    return bind_arguments(b.ctx, node, name, params, defaults)


def _if_then_else(b, node, name):
    """``T.if_then_else(cond, t, f)``; older TVM also writes the result ``dtype=``, which
    must be the branches' dtype."""
    a = _call_args(b, node, name, ["cond", "t", "f", "dtype"], {"dtype": None})
    cond = b._condition(a["cond"])
    t, f = b._promote(b.expr(a["t"]), b.expr(a["f"]), node)
    if a["dtype"] is not None:
        dtype = b._dtype(a["dtype"])
        t, f = b._coerce(t, dtype, a["t"]), b._coerce(f, dtype, a["f"])
    return tir.Call(t.dtype, "tir.if_then_else", [cond, t, f])


def _select(b, node, name):
    a = _call_args(b, node, name, ["condition", "true_value", "false_value"])
    cond = b._condition(a["condition"])
    t, f = b._promote(b.expr(a["true_value"]), b.expr(a["false_value"]), node)
    return tir.Select(t.dtype, cond, t, f)


def _cast(b, node, name):
    if name == "T.cast":
        a = _call_args(b, node, name, ["value", "dtype"])
    else:
        a = _call_args(b, node, name, ["dtype", "value"])
    dtype = b._dtype(a["dtype"])
    value = b.expr(a["value"])
    return tir.Cast(dtype, value)


def _binary(cls):
    """``T.max(a, b)``, ``T.floordiv(a, b)``...: the node ``cls`` over the promoted operands."""
    def handler(b, node, name):
        a = _call_args(b, node, name, ["a", "b"])
        x, y = b._promote(b.expr(a["a"]), b.expr(a["b"]), node)
        return cls(x.dtype, x, y)
    return handler


def _abs(b, node, name):
    a = _call_args(b, node, name, ["x"])
    x = b.expr(a["x"])
    return tir.Call(x.dtype, "tir.fabs" if tir.is_float(x.dtype) else "tir.abs", [x])


def _call_extern(b, node, name):
    return _named_call(b, node, name, "tir.call_extern")


def _named_call(b, node, name, op):
    """``T.call_extern("float32", "f", *args)``, or older TVM's ``T.call_extern("f", *args,
    dtype="float32")`` (``dtype=""``: no value, void)."""
    declared = [kw for kw in node.keywords if kw.arg == "dtype"]
    if len(declared) != len(node.keywords):
        raise b.error(f"{name}() takes no keyword arguments but dtype", node.keywords[0])
    rest = node.args
    if declared:
        d = declared[0].value
        dtype = "void" if isinstance(d, ast.Constant) and d.value == "" else b._dtype(d)
    else:
        if not rest:
            raise b.error(f"{name}(dtype, func_name, *args) needs a dtype and a function name", node)
        dtype, rest = b._dtype(rest[0]), rest[1:]
    if not rest:
        raise b.error(f"{name}(dtype, func_name, *args) needs a dtype and a function name", node)
    first = rest[0]
    if isinstance(first, ast.Call) and dotted_name(first.func) == "T.llvm_lookup_intrinsic_id":
        first = bind_arguments(b.ctx, first, "T.llvm_lookup_intrinsic_id", ["name"])["name"]  # the name it looks up
    func = literal(b.ctx, first)
    if not isinstance(func, str):
        raise b.error(f"{name}: the function name must be a string", rest[0])
    args = [b.expr(a) for a in rest[1:]]
    return tir.Call(dtype, op, [tir.StringImm("handle", func)] + args)


def _builtin(b, node, name):
    """A runtime or GPU builtin (`tir.BUILTINS`): its arguments as written (strings become
    StringImm), its result dtype from ``dtype=`` or the builtin's default."""
    op, dtype = tir.BUILTINS[name[2:]]
    args = list(node.args)
    if op in tir.DTYPE_FIRST_BUILTINS and args and isinstance(args[0], ast.Constant) \
            and isinstance(args[0].value, str) and tir.is_valid_dtype(args[0].value):
        dtype = args.pop(0).value  # T.ptx_mma("float32", "m16n8k16", ...): TVM's spelling
    for kw in node.keywords:
        if kw.arg != "dtype":
            raise b.error(f"{name}() takes no keyword arguments but dtype", kw)
        dtype = b._dtype(kw.value)
    return tir.Call(dtype, op, [b.expr(a) for a in args])


def _py_const(b, node, name):
    """``tvm.tir.const(True, "bool")`` (TVM's Python API inside a test's TVMScript): the
    typed constant ``T.bool(True)``."""
    a = _call_args(b, node, name, ["value", "dtype"], {"dtype": None})
    dtype = b._dtype(a["dtype"]) if a["dtype"] is not None else None
    value = literal(b.ctx, a["value"])
    if not isinstance(value, (bool, int, float)):
        raise b.error(f"{name} takes a number or a bool", a["value"])
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
    if tir.is_float(dtype):
        return tir.FloatImm(dtype, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise b.error(f"{name}: {value!r} is not a {dtype} value", a["value"])
    return tir.IntImm(dtype, int(value))


def _type_annotation(b, node, name):
    """``T.type_annotation("float16")``: a value standing for a dtype (TVM's builtin, the
    first argument of ``T.tvm_access_ptr``)."""
    a = _call_args(b, node, name, ["dtype"])
    return tir.Call(b._dtype(a["dtype"]), "tir.type_annotation", [])


def _warp_shuffle(b, node, name):
    """``T.tvm_warp_shuffle(mask, value, lane, width, warp_size)`` (and ``_up`` / ``_down``
    with a delta for the lane): ``value`` as seen from another lane, so of its dtype."""
    a = _call_args(b, node, name, ["mask", "value", "lane", "width", "warp_size", "dtype"], {"dtype": None})
    args = [b.expr(a[k]) for k in ("mask", "value", "lane", "width", "warp_size")]
    if a["dtype"] is not None and b._dtype(a["dtype"]) != args[1].dtype:
        raise b.error(f"{name} gives the value's dtype {args[1].dtype}", a["dtype"])
    return tir.Call(args[1].dtype, f"tir.{name[2:]}", args)


def _call_intrin(b, node, name):
    """``T.call_llvm_pure_intrin("uint8", "llvm.ctpop", x)`` (and ``call_llvm_intrin``,
    ``call_pure_extern``): a result dtype, the callee's name, its arguments."""
    return _named_call(b, node, name, f"tir.{name[2:]}")


def _struct_get(b, node, name):
    """``T.tvm_struct_get(args, 0, 12, T.handle().ty)`` (or older ``dtype="handle"``): field
    ``kind`` of element ``index`` of a runtime structure (TVM's packed-call ABI)."""
    a = _call_args(b, node, name, ["handle", "index", "kind", "dtype"])
    args = [b.expr(a[k]) for k in ("handle", "index", "kind")]
    return tir.Call(b._dtype(a["dtype"]), "tir.tvm_struct_get", args)


def _reinterpret(b, node, name):
    if len(node.args) == 1 and any(kw.arg == "dtype" for kw in node.keywords):
        # Older TVM: ``T.reinterpret(value, dtype="handle")``.
        a = _call_args(b, node, name, ["value", "dtype"])
        return tir.Call(b._dtype(a["dtype"]), "tir.reinterpret", [b.expr(a["value"])])
    a = _call_args(b, node, name, ["dtype", "value"])
    return tir.Call(b._dtype(a["dtype"]), "tir.reinterpret", [b.expr(a["value"])])


# Storage scopes a ``T.tvm_storage_sync`` barrier can name.
SYNC_SCOPES = ("shared", "shared.dyn", "warp", "global")


def _storage_sync(b, node, name):
    """``T.tvm_storage_sync("shared")``: a barrier among the threads of a GPU block (TVM's
    ``__syncthreads``). Parsed as TVM writes it; the CPU backend drops it (see
    `compiler.lower_tir.lower_thread_bindings`)."""
    a = _call_args(b, node, name, ["storage_scope", "rest*"])
    scope = literal(b.ctx, a["storage_scope"])
    if scope not in SYNC_SCOPES:
        raise b.error(f"{name}: the storage scope must be one of {', '.join(repr(s) for s in SYNC_SCOPES)}",
                      a["storage_scope"])
    # TVM 0.27 may add a flag and a thread count (``"warp", T.bool(False), -1``): kept as written.
    rest = [b.expr(x) for x in a["rest"]]
    return tir.Call("int32", "tir.tvm_storage_sync", [tir.StringImm("handle", scope)] + rest)


def _limit(op):
    def handler(b, node, name):
        a = _call_args(b, node, name, ["dtype"])
        dtype = b._dtype(a["dtype"])
        return tir.Call(dtype, op, [])
    return handler


def _lanes(b, node, name) -> int:
    """The lane count of a vector expression: a literal integer above 1."""
    lanes = literal(b.ctx, node)
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 2:
        raise b.error(f"{name}: lanes must be an integer literal of at least 2", node)
    return lanes


def _ramp(b, node, name):
    """``T.Ramp(base, stride, lanes)``: the vector base, base + stride, ... (lanes elements)."""
    a = _call_args(b, node, name, ["base", "stride", "lanes"])
    base, stride = b._promote(b.expr(a["base"]), b.expr(a["stride"]), node)
    if not tir.is_int(base.dtype):
        raise b.error(f"{name}: base and stride must be integers, not {base.dtype}", a["base"])
    lanes = _lanes(b, a["lanes"], name)
    return tir.Ramp(f"{base.dtype}x{lanes}", base, stride, lanes)


def _broadcast(b, node, name):
    """``T.Broadcast(value, lanes)``: a vector of ``lanes`` copies of a scalar."""
    a = _call_args(b, node, name, ["value", "lanes"])
    value = b.expr(a["value"])
    if "x" in value.dtype:
        raise b.error(f"{name}: the value must be a scalar, not {value.dtype}", a["value"])
    lanes = _lanes(b, a["lanes"], name)
    return tir.Broadcast(f"{value.dtype}x{lanes}", value, lanes)


def _assume(b, node, name):
    """``T.assume(cond)``: a fact the simplifier may rely on; evaluates to nothing."""
    a = _call_args(b, node, name, ["cond"])
    return tir.Call("bool", "tir.assume", [b._condition(a["cond"])])


def _address_of(b, node, name):
    """``T.address_of(A[i])``: the address of one buffer element, a handle."""
    a = _call_args(b, node, name, ["buffer_load", "dtype"], {"dtype": None})
    if a["dtype"] is not None and b._dtype(a["dtype"]) != "handle":
        raise b.error(f"{name} gives a handle, not {b._dtype(a['dtype'])}", a["dtype"])
    target = a["buffer_load"]
    if isinstance(target, ast.Name) and isinstance(b.scope.lookup(target.id), tir.Buffer):
        # ``T.address_of(A)``: the address of the buffer's first element, A[0, 0].
        buf = b.scope.lookup(target.id)
        return tir.Call("handle", "tir.address_of",
                        [tir.BufferLoad(buf.dtype, buf, [tir.IntImm(d.dtype, 0) for d in buf.shape])])
    load = b.expr(target)
    if not isinstance(load, tir.BufferLoad):
        raise b.error(f"{name} takes a buffer element such as A[i]", a["buffer_load"])
    return tir.Call("handle", "tir.address_of", [load])


def _let_expr(b, node, name):
    """``T.Let(x + 1, where={x: 1})``: an expression with ``x`` bound to 1 (x is declared
    with ``x = T.int32()``), TVM's Let expression."""
    a = _call_args(b, node, name, ["body", "where"])
    where = a["where"]
    if not isinstance(where, ast.Dict) or len(where.keys) != 1:
        raise b.error(f"{name}: where= binds one variable: where={{x: value}}", where)
    var = b.expr(where.keys[0])
    if not isinstance(var, tir.Var):
        raise b.error(f"{name}: the bound name must be a variable", where.keys[0])
    value = b._coerce(b.expr(where.values[0]), var.dtype, where.values[0])
    body = b.expr(a["body"])
    return tir.Let(body.dtype, var, value, body)


def _loop_control(b, node, name):
    """``T.continue_loop()`` / ``T.break_loop()``: leave this iteration or the whole loop, as
    TVM writes them (an evaluated intrinsic, no value)."""
    _call_args(b, node, name, [])
    if not b._loop_depth:
        raise b.error(f"{name}() is only allowed inside a loop", node)
    return tir.Call("void", f"tir.{name[2:]}", [])


EXPR_CALLS = {
    "T.continue_loop": _loop_control,
    "T.break_loop": _loop_control,
    "T.Ramp": _ramp,
    "T.Broadcast": _broadcast,
    "T.assume": _assume,
    "T.address_of": _address_of,
    "T.if_then_else": _if_then_else,
    "T.Select": _select,
    "T.Cast": _cast,
    "T.cast": _cast,
    "T.max": _binary(tir.Max),
    "T.min": _binary(tir.Min),
    "T.floordiv": _binary(tir.FloorDiv),
    "T.floormod": _binary(tir.FloorMod),
    "T.truncdiv": _binary(tir.Div),
    "T.truncmod": _binary(tir.Mod),
    "T.Div": _binary(tir.Div),
    "T.Mod": _binary(tir.Mod),
    "T.abs": _abs,
    "T.call_extern": _call_extern,
    "T.call_pure_extern": _call_intrin,
    "T.call_llvm_intrin": _call_intrin,
    "T.call_llvm_pure_intrin": _call_intrin,
    "T.ramp": _ramp,
    "T.Let": _let_expr,
    "tvm.tir.const": _py_const,
    "tvm.tirx.const": _py_const,
    "T.tvm_struct_get": _struct_get,
    "T.type_annotation": _type_annotation,
    "T.tvm_warp_shuffle": _warp_shuffle,
    "T.tvm_warp_shuffle_up": _warp_shuffle,
    "T.tvm_warp_shuffle_down": _warp_shuffle,
    "T.broadcast": _broadcast,
    **{f"T.{n}": _builtin for n in tir.BUILTINS},
    "T.reinterpret": _reinterpret,
    "T.max_value": _limit("tir.max_value"),
    "T.min_value": _limit("tir.min_value"),
    "T.tvm_storage_sync": _storage_sync,
}
