"""The ``R.*`` calls that are not ordinary ops: calls into TensorIR and packed functions,
constants, shapes and primitive values. One handler per name, in `RELAX_CALLS`.

``R.call_tir`` is read in both the classic form, ``R.call_tir(cls.f, (x,), out_sinfo=...)``, and
the older one, ``R.call_tir(f, (x,), (1, 128), dtype="float32")``, whose callee may be a bare name
or a string naming a registered extern function.
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .relax_builder import RelaxFunctionBuilder
from .relax_expressions import const_sinfo, typed_number

_MISSING = object()


def _args_tuple(b: RelaxFunctionBuilder, node, name: str) -> relax.Tuple:
    if isinstance(node, ast.Tuple) or isinstance(node, ast.List):
        fields = [b.expr(e) for e in node.elts]
    elif isinstance(node, ast.Call) and dotted_name(node.func) == "R.tuple":
        return b.expr(node)  # R.tuple(): no arguments, as TVM prints an empty tuple
    else:
        fields = [b.expr(node)]
    return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))


def _out_sinfo(b: RelaxFunctionBuilder, node, name: str) -> list:
    if isinstance(node, ast.List):
        return [b.sinfo(e) for e in node.elts]
    return [b.sinfo(node)]


def _callee(b: RelaxFunctionBuilder, node, name: str):
    """The function a call_tir targets: cls.f, a bare module function name, or a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return relax.ExternFunc(node.value)
    if isinstance(node, ast.Name):
        if node.id in b.ctx.module_names:
            gv = b.ctx.module_names[node.id]
        else:
            value = b.scope.lookup(node.id)
            if value is None:
                raise b.error(f"{name} to a missing function: '{node.id}' is not defined in this module", node)
            raise b.error(f"{name} expects a T.prim_func, not '{node.id}'", node)
    elif isinstance(node, ast.Attribute) and b.ctx.is_module_ref(node.value):
        gv = b.ctx.module_names.get(node.attr)
        if gv is None:
            raise b.error(f"{name} to a missing function: the module has no function '{node.attr}'", node)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and b.ctx.class_name:
        raise b.error(
            f"{name}: '{node.value.id}' is not this module; its functions are cls.{node.attr} "
            f"(or {b.ctx.class_name}.{node.attr})", node.value,
        )
    else:
        raise b.error(f"{name} expects a T.prim_func (cls.f) or an extern function name", node)
    kind = b.ctx.module_kinds.get(gv.name_hint)
    if kind != "tir":
        raise b.error(f"{name} expects a T.prim_func, but '{gv.name_hint}' is an R.function", node)
    return gv


def _old_style_sinfo(b: RelaxFunctionBuilder, shape_node, dtype_node, name: str):
    """``(1, 128), dtype="float32"`` of older TVMScript: one output tensor."""
    if not isinstance(shape_node, (ast.Tuple, ast.List)):
        raise b.error(f"{name}: expected the output shape as a tuple", shape_node)
    if dtype_node is None:
        raise b.error(f"{name}: the output shape needs dtype=", shape_node)
    dtype = literal(b.ctx, dtype_node)
    if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
        raise b.error(f"unknown dtype '{dtype}'", dtype_node)
    # Each dimension is checked as R.Tensor's are (int64): `(-0.0, 128)` is no shape.
    return [relax.TensorStructInfo([b._shape_dim(e, True) for e in shape_node.elts], dtype)]


def _result_sinfo(sinfos: list):
    return sinfos[0] if len(sinfos) == 1 else relax.TupleStructInfo(list(sinfos))


def _tir_call(b: RelaxFunctionBuilder, node: ast.Call, name: str, args: dict):
    """What every call_tir form shares, from its bound arguments: the callee, the call's
    arguments (callee, args tuple, tir_vars when given) and the output struct infos."""
    func = _callee(b, args["func"], name)
    tup = _args_tuple(b, args["args"], name)
    out = args["out_sinfo"] if args["out_sinfo"] is not None else args["out_ty"]
    if out is None:
        raise b.error(f"{name}() missing required argument 'out_sinfo'", node)
    if isinstance(out, (ast.Tuple,)) or args.get("dtype") is not None:
        sinfos = _old_style_sinfo(b, out, args.get("dtype"), name)
    else:
        sinfos = _out_sinfo(b, out, name)
    for s in sinfos:
        if not isinstance(s, relax.TensorStructInfo):
            raise b.error(f"{name}: out_sinfo must be R.Tensor(...) or a list of them", out)
    call_args = [func, tup]
    if args["tir_vars"] is not None:
        tv = args["tir_vars"]
        elts = tv.elts if isinstance(tv, (ast.Tuple, ast.List)) else None
        if isinstance(tv, ast.Call) and dotted_name(tv.func) == "R.shape":
            if len(tv.args) == 1 and not tv.keywords and isinstance(tv.args[0], (ast.Tuple, ast.List)):
                elts = tv.args[0].elts
        if elts is None:
            raise b.error("tir_vars must be a shape such as R.shape([n])", tv)
        vals = [b.dim(e, False) for e in elts]
        call_args.append(relax.ShapeExpr(vals, relax.ShapeStructInfo(vals)))
    return func, call_args, sinfos


def _note_contradiction(b: RelaxFunctionBuilder, node: ast.Call, name: str, call_args: list, sinfos: list,
                        inplace_indices=None) -> None:
    """Note in ``b`` a call_tir that contradicts the signature of the prim_func it calls
    (`ir.op.call_tir.call_tir_mismatch`). It is read as written, as TVM reads it, and
    `tvms check` reports it; but an error later in the function, at an op given the wrong
    shape, is reported as this one (`RelaxFunctionBuilder.first_cause`)."""
    from ..ir.op.call_tir import call_tir_mismatch, describe_arg

    func = call_args[0]
    prim = b.ctx.prim_funcs.get(func.name_hint) if isinstance(func, ir.GlobalVar) else None
    if prim is None:
        return
    passed = [(relax.struct_info_of(a), describe_arg(a)) for a in call_args[1].fields]
    tir_vars = call_args[2].values if len(call_args) > 2 else None
    mismatch = call_tir_mismatch(func.name_hint, prim, passed, sinfos, tir_vars, inplace_indices, name)
    if mismatch is not None:
        b.contradictions.append(b.error(f"in '{b.name}': {mismatch}", node))


def call_tir(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(
        b.ctx, node, name, ["func", "args", "out_sinfo", "tir_vars", "dtype", "out_ty"],
        {"out_sinfo": None, "tir_vars": None, "dtype": None, "out_ty": None},
    )
    func, call_args, sinfos = _tir_call(b, node, name, args)
    _note_contradiction(b, node, name, call_args, sinfos)
    op = "relax.call_tir"
    if isinstance(func, relax.ExternFunc):
        # Older TVMScript called packed functions with R.call_tir("env.f", ...); TVM now calls
        # them with R.call_dps_packed, which is what this is and how it prints.
        if len(call_args) > 2:
            raise b.error(f"{name} of an extern function takes no tir_vars", args["tir_vars"])
        op = "relax.call_dps_packed"
    return relax.Call(relax.Op(op), call_args, {}, sinfos, _result_sinfo(sinfos), b.ctx.span(node))


def _prim_func_only(b: RelaxFunctionBuilder, func, node, name: str) -> None:
    if isinstance(func, relax.ExternFunc):
        raise b.error(f"{name} expects a T.prim_func (cls.f), not an extern function name", node)


def call_tir_inplace(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.call_tir_inplace(f, args, inplace_indices=[...], out_sinfo=...)``: call_tir whose
    output ``i`` is the argument ``inplace_indices[i]``, written in place (-1: a new tensor),
    kept in the call's ``inplace_indices`` attribute as TVM does."""
    args = bind_arguments(
        b.ctx, node, name, ["func", "args", "inplace_indices", "out_sinfo", "tir_vars", "out_ty"],
        {"inplace_indices": None, "out_sinfo": None, "tir_vars": None, "out_ty": None},
    )
    if isinstance(args["args"], ast.Name) and isinstance(
            relax.struct_info_of(b.scope.lookup(args["args"].id)), relax.TupleStructInfo):
        # TVM takes only a tuple written in place here, to see which argument each index names.
        raise b.error(f"{name}: write the arguments as a tuple in the call, e.g. (x, y), not a variable "
                      "holding one", args["args"])
    func, call_args, sinfos = _tir_call(b, node, name, args)
    _prim_func_only(b, func, args["func"], name)
    where = args["inplace_indices"] or node
    if args["inplace_indices"] is None:
        raise b.error(f"{name}() missing required argument 'inplace_indices'", node)
    value = literal(b.ctx, args["inplace_indices"])
    indices = [value] if isinstance(value, int) else value
    if not isinstance(indices, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise b.error(f"{name}: inplace_indices must be a list of ints", where)
    n_args = len(call_args[1].fields)
    if len(indices) != len(sinfos):
        raise b.error(f"{name}: {len(indices)} inplace_indices for {len(sinfos)} output(s)", where)
    for i in indices:
        if i < -1 or i >= n_args:
            raise b.error(f"{name}: inplace index {i} is not an argument (there are {n_args}; -1 for a new output)", where)
    if all(i == -1 for i in indices):
        raise b.error(f"{name}: at least one inplace index must name an argument (use R.call_tir otherwise)", where)
    _note_contradiction(b, node, name, call_args, sinfos, indices)
    attrs = {"inplace_indices": list(indices)}
    return relax.Call(relax.Op("relax.call_tir_inplace"), call_args, attrs, sinfos, _result_sinfo(sinfos),
                      b.ctx.span(node))


def call_tir_with_grad(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.call_tir_with_grad(f, args, out_sinfo, te_grad_name=..., te_grad_kwargs={...})``:
    call_tir naming the TE function of its gradient, for TVM's Gradient pass; it runs as call_tir."""
    args = bind_arguments(
        b.ctx, node, name, ["func", "args", "out_sinfo", "te_grad_name", "te_grad_kwargs", "tir_vars", "out_ty"],
        {"out_sinfo": None, "te_grad_name": None, "te_grad_kwargs": None, "tir_vars": None, "out_ty": None},
    )
    func, call_args, sinfos = _tir_call(b, node, name, args)
    _prim_func_only(b, func, args["func"], name)
    _note_contradiction(b, node, name, call_args, sinfos)
    if args["te_grad_name"] is None:
        raise b.error(f"{name}() missing required argument 'te_grad_name'", node)
    grad_name = literal(b.ctx, args["te_grad_name"])
    if not isinstance(grad_name, str):
        raise b.error(f"{name}: te_grad_name must be a string", args["te_grad_name"])
    kwargs = literal(b.ctx, args["te_grad_kwargs"]) if args["te_grad_kwargs"] is not None else {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise b.error(f"{name}: te_grad_kwargs must be a dict with string keys", args["te_grad_kwargs"] or node)
    attrs = {"te_grad_name": grad_name, "te_grad_kwargs": dict(kwargs)}
    return relax.Call(relax.Op("relax.call_tir_with_grad"), call_args, attrs, sinfos, _result_sinfo(sinfos),
                      b.ctx.span(node))


def call_dps_packed(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["func", "args", "out_sinfo", "dtype", "out_ty"],
                          {"out_sinfo": None, "dtype": None, "out_ty": None})
    callee = _packed_callee(b, args["func"], name)
    tup = _args_tuple(b, args["args"], name)
    out = args["out_sinfo"] if args["out_sinfo"] is not None else args["out_ty"]
    if out is None:
        raise b.error(f"{name}() missing required argument 'out_sinfo'", node)
    sinfos = _old_style_sinfo(b, out, args["dtype"], name) if isinstance(out, ast.Tuple) else _out_sinfo(b, out, name)
    return relax.Call(relax.Op("relax.call_dps_packed"), [callee, tup], {}, sinfos,
                      _result_sinfo(sinfos), b.ctx.span(node))


def _packed_callee(b: RelaxFunctionBuilder, node, name: str):
    """The extern function of call_dps_packed: its name, ``R.ExternFunc("name")``, or a
    variable bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return relax.ExternFunc(node.value)
    callee = b.expr(node)
    if isinstance(callee, relax.ExternFunc):
        return relax.ExternFunc(callee.global_symbol)  # the callee as its name, as it prints
    if not isinstance(relax.struct_info_of(callee), (relax.FuncStructInfo, relax.ObjectStructInfo)):
        raise b.error(f"{name} expects an extern function: its name as a string, or R.ExternFunc(\"name\")", node)
    return callee


def extern_sinfo() -> relax.FuncStructInfo:
    """An extern function's struct info: opaque (TVM prints it R.Callable)."""
    return relax.FuncStructInfo(None, relax.ObjectStructInfo(), True)


def extern_func(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.ExternFunc("name")``: a function found by name at run time, as a value."""
    args = bind_arguments(b.ctx, node, name, ["global_symbol"])
    symbol = literal(b.ctx, args["global_symbol"])
    if not isinstance(symbol, str):
        raise b.error(f"{name} takes the function's name as a string", args["global_symbol"])
    return relax.ExternFunc(symbol, extern_sinfo())


def call_packed(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    if not node.args or not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        raise b.error(f"{name} expects the packed function's name as a string first", node)
    sinfo_args = []
    for kw in node.keywords:
        if kw.arg in ("sinfo_args", "ty_args"):
            v = kw.value
            items = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
            sinfo_args = [b.sinfo(e) for e in items]
        else:
            raise b.error(f"{name}() got an unexpected keyword argument '{kw.arg}'", kw)
    args = [b.expr(a) for a in node.args[1:]]
    sinfo = _result_sinfo(sinfo_args) if sinfo_args else relax.ObjectStructInfo()
    func = relax.ExternFunc(node.args[0].value)
    if name == "R.call_pure_packed":
        return relax.Call(relax.Op("relax.call_pure_packed"), [func] + args, {}, sinfo_args, sinfo, b.ctx.span(node))
    return relax.Call(func, args, {}, sinfo_args, sinfo, b.ctx.span(node))


def alloc_tensor(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["shape", "dtype", "runtime_device_index", "storage_scope", "ty_args"],
                          {"runtime_device_index": None, "storage_scope": None, "ty_args": None})
    shape = _shape_value(b, args["shape"])
    dtype_node = _unwrap(b, args["dtype"], "R.dtype")
    dtype = literal(b.ctx, dtype_node)
    if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
        raise b.error(f"unknown dtype '{dtype}'", args["dtype"])
    device = 0
    if args["runtime_device_index"] is not None:
        dn = _unwrap(b, args["runtime_device_index"], "R.prim_value")
        device = literal(b.ctx, dn)
        if not isinstance(device, int) or isinstance(device, bool):
            raise b.error(f"{name}: runtime_device_index must be an integer", dn)
    scope = "global"
    if args["storage_scope"] is not None:
        sn = _unwrap(b, args["storage_scope"], "R.str")
        scope = literal(b.ctx, sn)
        if not isinstance(scope, str):
            raise b.error(f"{name}: storage_scope must be a string such as \"global\"", sn)
    sinfo = relax.TensorStructInfo(list(shape.values), dtype)
    if args["ty_args"] is not None:  # TVM 0.27 prints the result's struct info: it must agree
        given = args["ty_args"].elts if isinstance(args["ty_args"], (ast.Tuple, ast.List)) else [args["ty_args"]]
        if len(given) != 1:
            raise b.error(f"{name}: ty_args names one struct info, the tensor's", args["ty_args"])
        b.check_annotation(b.sinfo(given[0]), sinfo, given[0], name)
    call_args = [
        shape,
        relax.DataTypeImm(dtype, relax.ObjectStructInfo()),
        relax.PrimValue(tir.IntImm("int64", device), relax.PrimStructInfo("int64", tir.IntImm("int64", device))),
        relax.StringImm(scope, relax.ObjectStructInfo()),
    ]
    return relax.Call(relax.Op("relax.builtin.alloc_tensor"), call_args, {}, [], sinfo, b.ctx.span(node))


def _unwrap(b: RelaxFunctionBuilder, node, wrapper: str):
    """The argument of ``R.dtype("float32")`` / ``R.prim_value(0)`` / ``R.str("global")`` where a
    plain literal may also be written."""
    if isinstance(node, ast.Call) and dotted_name(node.func) == wrapper:
        args = bind_arguments(b.ctx, node, wrapper, ["value"])
        return args["value"]
    return node


def _shape_value(b: RelaxFunctionBuilder, node) -> relax.ShapeExpr:
    if isinstance(node, ast.Call) and dotted_name(node.func) == "R.shape":
        if len(node.args) != 1:
            raise b.error("R.shape takes one list of dimensions", node)
        node = node.args[0]
    if not isinstance(node, (ast.Tuple, ast.List)):
        raise b.error("expected a shape such as (1, 128) or R.shape([1, 128])", node)
    vals = [b.dim(e, False) for e in node.elts]
    return relax.ShapeExpr(vals, relax.ShapeStructInfo(vals))


def shape(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    return _shape_value(b, node)


def shape_expr(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.ShapeExpr((m, n))``: older TVMScript's name of ``R.shape([m, n])``."""
    args = bind_arguments(b.ctx, node, name, ["values"])
    return _shape_value(b, args["values"])


def emit_with_ty(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.emit_with_ty("relax.op_name", (args...), (struct info,))``: a call of a registered op
    by its full name, with the struct info given; read as the call ``R.op_name(args...)``."""
    args = bind_arguments(b.ctx, node, name, ["op", "args", "ty"], {"ty": None})
    op = literal(b.ctx, args["op"])
    if not isinstance(op, str) or not op.startswith("relax."):
        raise b.error(f'{name} takes an op\'s full name first, e.g. "relax.builtin.alloc_tensor"', args["op"])
    if not isinstance(args["args"], (ast.Tuple, ast.List)):
        raise b.error(f"{name} takes the op's arguments as a tuple", args["args"])
    at = (node.line, node.col, node.end_line, node.end_col)
    func: ast.Expr = ast.Name("R", *at)
    for part in op.split(".")[1:]:
        func = ast.Attribute(func, part, *at)
    call = b.expr(ast.Call(func, list(args["args"].elts), [], *at))
    if args["ty"] is not None:
        given = _out_sinfo(b, args["ty"].elts[0] if isinstance(args["ty"], ast.Tuple) and len(args["ty"].elts) == 1
                           else args["ty"], name)
        b.check_annotation(_result_sinfo(given), relax.struct_info_of(call), args["ty"], name)
    return call


def tuple_get_item(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.TupleGetItem(t, 1)``: older TVMScript's spelling of ``t[1]``."""
    args = bind_arguments(b.ctx, node, name, ["tuple_value", "index"])
    return b.tuple_item(b.expr(args["tuple_value"]), args["index"], args["tuple_value"])


def const(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["value", "dtype"], {"dtype": None})
    value = literal(b.ctx, args["value"])
    dtype = literal(b.ctx, args["dtype"]) if args["dtype"] is not None else None
    if dtype is not None and (not isinstance(dtype, str) or not tir.is_valid_dtype(dtype)):
        raise b.error(f"unknown dtype '{dtype}'", args["dtype"])
    import numpy as np

    try:
        if dtype is None:
            arr = relax.default_const_array(value)
        else:
            arr = np.array(value, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as err:
        raise b.error(f"R.const: {err}", args["value"]) from None
    if not tir.is_valid_dtype(str(arr.dtype)):
        raise b.error(f"R.const: cannot make a tensor of {str(arr.dtype)!r} values from this value", args["value"])
    return relax.Constant(arr, const_sinfo(arr))


def prim_value(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["value"])
    v = args["value"]
    if isinstance(v, ast.UnaryOp) and v.op in ("-", "+") and isinstance(v.operand, ast.Constant):
        number = literal(b.ctx, v)  # R.prim_value(-1): a negative number, not a dimension
        v = ast.Constant(number, v.line, v.col, v.end_line, v.end_col)
    number = typed_number(b.ctx, v)  # R.prim_value(T.float32(0.5)), R.prim_value(T.float64("-inf"))
    if number is not None:
        return relax.PrimValue(number, relax.PrimStructInfo(number.dtype, number))
    if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        e = tir.IntImm("int64", v.value) if isinstance(v.value, int) else tir.FloatImm("float64", v.value)
    elif (flag := b.bool_value(v)) is not None:
        return flag  # R.prim_value(True): a bool primitive value
    elif isinstance(v, ast.Name) and isinstance(b.scope.lookup(v.id), relax.Var):
        var = b.scope.lookup(v.id)  # R.prim_value(n) of a primitive Relax value: that value
        if not isinstance(relax.struct_info_of(var), relax.PrimStructInfo):
            raise b.error(f"R.prim_value takes a primitive value; '{v.id}' is not one", v)
        return b.expr(v)
    else:
        e = b.dim(v, False)
    return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))


def str_imm(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["value"])
    value = literal(b.ctx, args["value"])
    if not isinstance(value, str):
        raise b.error("R.str takes a string", args["value"])
    return relax.StringImm(value, relax.ObjectStructInfo())


def dtype_imm(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    args = bind_arguments(b.ctx, node, name, ["value"])
    value = literal(b.ctx, args["value"])
    if not isinstance(value, str) or not tir.is_valid_dtype(value):
        raise b.error(f"unknown dtype '{value}'", args["value"])
    return relax.DataTypeImm(value, relax.ObjectStructInfo())


def match_cast_outside(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    raise b.error("R.match_cast must be the whole right-hand side of a binding", node)


def python_helper(b: RelaxFunctionBuilder, node: ast.Call, name: str, fn):
    """``R.nn.relu6(x)``: an op TVM has only as a Python helper ``fn`` building another op's call
    (``R.clip(x, 0, 6)``; see ``tvmscript/ir/op/api.py: HELPERS``); its arguments are Relax
    expressions, as the helper's are."""
    import inspect

    sig = inspect.signature(fn)
    defaults = {p.name: p.default for p in sig.parameters.values() if p.default is not inspect.Parameter.empty}
    bound = bind_arguments(b.ctx, node, name, list(sig.parameters), defaults)
    values = {k: (b.expr(v) if isinstance(v, ast.Node) else v) for k, v in bound.items()}
    try:
        call = fn(**values)
    except ValueError as err:
        raise b.error(str(err).replace("relax.op.", "R."), node) from None
    call.span = b.ctx.span(node)
    return call


def tuple_call(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.tuple(a, b)``: TVM's call form of the tuple ``(a, b)``, which it is (and prints as)."""
    if node.keywords:
        raise b.error(f"{name}() takes no keyword arguments", node.keywords[0])
    fields = [b.expr(a) for a in node.args]
    return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))


def _format_string(b: RelaxFunctionBuilder, node: ast.Call, name: str) -> relax.StringImm:
    """The ``format=`` keyword of R.print / R.assert_op: a plain string or ``R.str("...")``
    (TVM prints the latter); the empty string when left out, as TVM defaults it."""
    fmt = relax.StringImm("", relax.ObjectStructInfo())
    for kw in node.keywords:
        if kw.arg != "format":
            raise b.error(f"{name}() got an unexpected keyword argument '{kw.arg}'", kw)
        if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            fmt = relax.StringImm(kw.value.value, relax.ObjectStructInfo())
        else:
            fmt = b.expr(kw.value)
            if not isinstance(fmt, relax.StringImm):
                raise b.error(f"{name}'s format must be a string or R.str(...)", kw.value)
    return fmt


def _void_call(b: RelaxFunctionBuilder, node: ast.Call, op: str, args: list) -> relax.Call:
    """An impure builtin call returning nothing: TVM gives it the empty tuple's struct info."""
    return relax.Call(relax.Op(op), args, {}, [], relax.TupleStructInfo([]), b.ctx.span(node))


def print_call(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.print(*values, format="...")``: TVM's call holds the format first, then the values."""
    fmt = _format_string(b, node, name)
    return _void_call(b, node, "relax.print", [fmt] + [b.expr(a) for a in node.args])


def assert_op(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.assert_op(cond, format_args, format="...")``: ``format_args`` is one value, a list of
    values, or (as TVM prints it) the values one after another. The call holds the condition,
    the format, then the values."""
    if not node.args:
        raise b.error(f"{name} expects a condition first", node)
    fmt = _format_string(b, node, name)
    rest = node.args[1:]
    if len(rest) == 1 and isinstance(rest[0], (ast.List, ast.Tuple)):
        rest = rest[0].elts
    values = [b.expr(a) for a in rest]
    return _void_call(b, node, "relax.assert_op", [b.expr(node.args[0]), fmt] + values)


def hint_on_device(b: RelaxFunctionBuilder, node: ast.Call, name: str):
    """``R.hint_on_device(data, R.device(device_type, index), memory_scope="global")``: the
    device is written as a call; the op keeps its type and index as attributes, as TVM does."""
    from ..ir.op import get_op

    args = bind_arguments(b.ctx, node, name, ["data", "dst_vdevice", "memory_scope"], {"memory_scope": None})
    dev = args["dst_vdevice"]
    if not (isinstance(dev, ast.Call) and dotted_name(dev.func) == "R.device"):
        raise b.error(f"{name} expects the device as R.device(device_type, index)", dev)
    d = bind_arguments(b.ctx, dev, "R.device", ["device_type", "index"], {"index": None})
    keywords = [ast.Keyword(k, v, *v.span_tuple()) for k, v in
                [("device_type", d["device_type"]), ("index", d["index"]), ("memory_scope", args["memory_scope"])]
                if v is not None]
    call = ast.Call(node.func, [args["data"]], keywords, *node.span_tuple())
    return b._op_call(get_op("hint_on_device"), call, name)


RELAX_CALLS = {
    "R.hint_on_device": hint_on_device,
    "R.print": print_call,
    "R.assert_op": assert_op,
    "R.call_tir": call_tir,
    "R.call_tir_inplace": call_tir_inplace,
    "R.call_tir_with_grad": call_tir_with_grad,
    "R.tuple": tuple_call,
    "R.call_dps_packed": call_dps_packed,
    "R.ExternFunc": extern_func,
    "R.call_packed": call_packed,
    "R.call_pure_packed": call_packed,
    "R.alloc_tensor": alloc_tensor,
    "R.builtin.alloc_tensor": alloc_tensor,
    "R.shape": shape,
    "R.ShapeExpr": shape_expr,
    "R.emit_with_ty": emit_with_ty,
    "R.TupleGetItem": tuple_get_item,
    "R.const": const,
    "R.prim_value": prim_value,
    "R.str": str_imm,
    "R.dtype": dtype_imm,
    "R.match_cast": match_cast_outside,
}
