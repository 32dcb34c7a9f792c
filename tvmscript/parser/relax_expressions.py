"""Relax expressions: names (variables, the module's functions, symbolic dims, names of the
Python scope around TVMScript in Python), tuples and their items, constants of the metadata
section, numbers and typed literals as primitive values, arithmetic of symbolic dims (or, on
Relax values, the op a Python operator stands for), and calls: an ``R.*`` call of the table
`relax_calls.RELAX_CALLS`, an op of the op registry (arguments bound to its signature, its
attributes converted, its struct info inferred), a method such as ``x.astype``, or a call of a
module function or a closure.
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from ..ir.index_map import IndexMap
from ..diagnostics import TVMScriptError, did_you_mean
from . import ast
from ..metadata import CONSTANT_KEY, TENSOR_ALIASES, TENSOR_KEY
from .arguments import bind_arguments, dotted_name, literal
from .context import Context
from .relax_bindings import ClassRef, Expired
from .tir_names import DTYPE_NAMES


class RelaxExpressions:
    """The expressions of `RelaxFunctionBuilder` (relax_builder.py)."""

    def bool_value(self, node):
        """``True``/``False`` (or ``T.bool(True)``-free spellings) as a bool primitive value,
        as TVM reads them in a Relax expression; None for any other node."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            flag = node.value
        elif isinstance(node, ast.Name) and node.id in ("True", "False") and self.scope.lookup(node.id) is None:
            flag = node.id == "True"
        else:
            return None
        e = tir.IntImm("bool", int(flag))
        return relax.PrimValue(e, relax.PrimStructInfo("bool", e))

    def expr(self, node) -> relax.Expr:
        flag = self.bool_value(node)
        if flag is not None:
            # A bare True/False in a Relax expression is a bool tensor constant, as TVM reads
            # it (R.prim_value(True) is the primitive value).
            import numpy as np

            array = np.array(bool(flag.value.value))
            return relax.Constant(array, const_sinfo(array))
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.List):
            # ``R.strided_slice(x, axes=[0, 1], ...)``: a list where a tuple of values is meant.
            node = ast.Tuple(node.elts, node.line, node.col, node.end_line, node.end_col)
        if isinstance(node, ast.Tuple):
            fields = [self.expr(e) for e in node.elts]
            return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return relax.StringImm(node.value, relax.ObjectStructInfo())
        if isinstance(node, ast.UnaryOp) and node.op in ("-", "+") and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            # A negative number (the -1 of R.reshape(x, (3, -1))): a primitive value too.
            node = ast.Constant(literal(self.ctx, node), node.line, node.col, node.end_line, node.end_col)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            # A bare number is a primitive value, as R.prim_value(...) writes it.
            v = node.value
            e = tir.IntImm("int64", v) if isinstance(v, int) else tir.FloatImm("float64", v)
            return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return self._sym_arithmetic(node)
        raise self.error("unsupported expression in an R.function", node)

    def _sym_arithmetic(self, node) -> relax.Expr:
        """``a // 2`` of symbolic dims where a Relax value is meant (``R.reshape(x, (a // 2, b))``,
        ``if N % 16 == 0:``): the primitive value of that expression, as TVM reads it. On Relax
        values, an operator is the op TVM's Python operators call (``x + y`` is ``R.add(x, y)``)."""
        try:
            e = self.dim(node, False)
        except TVMScriptError as err:
            call = _operator_call(node)
            if call is not None:
                return self._call(call)
            raise self.error("unsupported expression in an R.function: arithmetic here may only use "
                             "symbolic dims (T.int64()) and numbers", node) from err
        return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))

    def _name(self, node: ast.Name):
        value = self.scope.lookup(node.id)
        if isinstance(value, Expired):
            raise self.error(
                f"dataflow variable '{node.id}' is used outside its dataflow block",
                node,
                [f"list it in R.output(...) at the end of the block to use it afterwards"],
            )
        if isinstance(value, relax.Var):
            return value
        if value is None and node.id in self.ctx.module_names:
            return self.ctx.module_names[node.id]
        if value is None and node.id in self.sym_vars:
            v = self.sym_vars[node.id]
            return relax.PrimValue(v, relax.PrimStructInfo(v.dtype, v))
        if value is None:
            found = self._py_expr(node.id)
            if found is not None:
                return found
        if node.id in ("meta", "metadata"):
            raise self.error(f"'{node.id}[...]' refers to a metadata section, which this file does not have", node)
        visible = [n for frame in self.scope.frames for n, v in frame.items() if isinstance(v, relax.Var)]
        raise self.error(f"undefined name '{node.id}'", node, did_you_mean(node.id, visible))

    def _py_expr(self, name: str):
        """A Relax value named from the enclosing Python scope: a number or PrimExpr as a
        primitive value, a GlobalVar as itself, a tuple of those as a tuple; None otherwise."""
        value = self.ctx.py_value(name)
        return _py_to_relax(value)

    def _attribute(self, node: ast.Attribute):
        if self.ctx.is_module_ref(node.value):
            if not isinstance(self.scope.lookup("cls"), ClassRef) and "cls" not in self.ctx.module_names:
                if self.scope.lookup("cls") is None and not self.ctx.module_names:
                    raise self.error("'cls' refers to the module, but this function is not in an @I.ir_module", node.value)
            gv = self.ctx.module_names.get(node.attr)
            if gv is None:
                raise self.error(f"module has no function named '{node.attr}'", node)
            return gv
        raise self.error(f"unsupported expression '{dotted_name(node) or node.attr}'", node)

    def _subscript(self, node: ast.Subscript):
        inner = node.value
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id in ("meta", "metadata"):
            return self._metadata_constant(inner.value.id, inner.index, node)
        if isinstance(node.value, ast.Name) and node.value.id in ("meta", "metadata"):
            raise self.error(f"{node.value.id}[...] needs a kind and an index: metadata[\"{CONSTANT_KEY}\"][0]", node)
        return self.tuple_item(self.expr(node.value), node.index, node.value)

    def tuple_item(self, base, index_node, base_node):
        """``base[index]`` of a tuple value."""
        node = ast.Subscript(base_node, index_node, base_node.line, base_node.col,
                             index_node.end_line, index_node.end_col)
        index = literal(self.ctx, index_node)
        if not isinstance(index, int):
            raise self.error("a tuple index must be an integer", node.index)
        sinfo = relax.struct_info_of(base)
        if isinstance(sinfo, relax.TupleStructInfo):
            if not -len(sinfo.fields) <= index < len(sinfo.fields):
                raise self.error(f"tuple index {index} is out of range for a tuple of {len(sinfo.fields)}", node.index)
            if index < 0:
                index += len(sinfo.fields)
            return relax.TupleGetItem(base, index, sinfo.fields[index])
        if isinstance(sinfo, relax.ObjectStructInfo):
            return relax.TupleGetItem(base, index, relax.ObjectStructInfo())
        raise self.error("only tuples can be indexed in Relax", node.value)

    # ------------------------------------------------------------------ the metadata section
    def _metadata_constant(self, name: str, key_node, node: ast.Subscript):
        """``metadata["relax.expr.Constant"][i]`` (and older TVM's ``meta[relay.Constant][i]``):
        the i-th constant of the file's metadata section (see tvmscript/metadata.py)."""
        key, array = self._metadata_entry(name, key_node, node)
        if key == TENSOR_KEY:
            raise self.error(
                f'metadata["{TENSOR_KEY}"] holds the tensors of function attributes; a constant in '
                f'the body is metadata["{CONSTANT_KEY}"][i]',
                key_node,
            )
        return relax.Constant(array, const_sinfo(array))

    def _metadata_entry(self, name: str, key_node, node: ast.Subscript):
        """``(table name, entry)`` for a reference ``name[key][i]`` into the metadata section,
        with older TVM's names of the tables read as today's."""
        key = key_node.value if isinstance(key_node, ast.Constant) else dotted_name(key_node)
        if key in ("relay.Constant", "R.expr.Constant", "ir.GenericConst"):
            key = CONSTANT_KEY  # older and newer TVM's names for the same table
        elif key in TENSOR_ALIASES:
            key = TENSOR_KEY
        index = literal(self.ctx, node.index)
        table = self.ctx.metadata.get(key)
        if table is None:
            if not self.ctx.metadata:
                raise self.error(
                    f"{name}[...] refers to a metadata section (arrays stored at the end of the file), "
                    "which this file does not have",
                    node,
                )
            raise self.error(f"the metadata section has no '{key}' table", key_node)
        if not isinstance(index, int) or not 0 <= index < len(table):
            raise self.error(f"metadata['{key}'] has {len(table)} entries; there is no [{index}]", node.index)
        return key, table[index]

    def _func_attr_value(self, node):
        """The dict of ``R.func_attr({...})``: Python literals, where ``metadata["ffi.Tensor"][i]``
        stands for a tensor of the metadata section (the importers' ``"params"``)."""
        return literal(self.ctx, node, self._attr_tensor)

    def _attr_tensor(self, node):
        """A `tvms.nd` tensor of the metadata section, referenced in a function attribute."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.value, ast.Name) and node.value.value.id in ("meta", "metadata")):
            raise self.error("expected a literal value or a metadata[\"ffi.Tensor\"][i] reference", node)
        key, entry = self._metadata_entry(node.value.value.id, node.value.index, node)
        if key != TENSOR_KEY:
            raise self.error(
                f'a tensor in a function attribute is metadata["{TENSOR_KEY}"][i], not an entry of '
                f"the '{key}' table",
                node.value.index,
            )
        return entry

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call):
        from .relax_calls import RELAX_CALLS

        name = dotted_name(node.func)
        handler = RELAX_CALLS.get(name) if name else None
        if handler is not None:
            return handler(self, node, name)
        number = typed_number(self.ctx, node)
        if number is not None:
            # ``T.float32(1.0)`` where a Relax value is expected: a primitive value, as TVM
            # prints one (``R.clip(x, T.float64(-1.5), T.float64(2.5))``, one_hot's values).
            return relax.PrimValue(number, relax.PrimStructInfo(number.dtype, number))
        if name and name.startswith("R."):
            from ..ir.op import find_op

            op = find_op(name)
            if op is None:
                from ..ir.op import all_ops
                from ..ir.op.api import HELPERS
                from .relax_calls import RELAX_CALLS, python_helper

                if name[2:] in HELPERS:
                    return python_helper(self, node, name, HELPERS[name[2:]])
                known = [o.script_name for o in all_ops().values()] + list(RELAX_CALLS) + [f"R.{h}" for h in HELPERS]
                raise self.error(f"unknown Relax function '{name}'", node.func, did_you_mean(name, known))
            return self._op_call(op, node, name)
        method = self._method_call(node)
        if method is not None:
            return self._call(method)
        callee = self.expr(node.func)
        args = [self.expr(a) for a in node.args]
        if node.keywords:
            raise self.error("calls of Relax functions take no keyword arguments", node.keywords[0])
        sinfo = relax.ObjectStructInfo()
        callee_sinfo = relax.struct_info_of(callee)
        if isinstance(callee_sinfo, relax.FuncStructInfo) and callee_sinfo.ret is not None:
            sinfo = callee_sinfo.ret  # a call of a closure or of a function-typed value
        if isinstance(callee, ir.GlobalVar):
            kind = self.ctx.module_kinds.get(callee.name_hint)
            if kind == "tir":
                sinfo = self._prim_func_result(callee.name_hint)
            ret = getattr(self.ctx, "relax_signatures", {}).get(callee.name_hint)
            if ret is not None:
                sinfo = ret
        return relax.Call(callee, args, {}, [], sinfo, self.ctx.span(node))

    def _method_call(self, node: ast.Call):
        """``A.astype("float16")``: a method of TVM's Relax values, as the syntax of the op
        call it makes (``R.astype(A, "float16")``); None for any other call."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _METHOD_OPS and isinstance(func.value, ast.Name)
                and isinstance(self.scope.lookup(func.value.id), relax.Var)):
            return None
        at = (func.line, func.col, func.end_line, func.end_col)
        op = ast.Attribute(ast.Name("R", *at), _METHOD_OPS[func.attr], *at)
        return ast.Call(op, [func.value] + list(node.args), node.keywords, node.line, node.col,
                        node.end_line, node.end_col)

    def _prim_func_result(self, name: str) -> relax.StructInfo:
        """What a direct call of a T.prim_func gives, as TVM types it: the primitive value its
        ``-> T.int64`` annotation names, else nothing (a void call, made for its effect on
        the buffers passed in)."""
        fdef = self.ctx.module_defs.get(name)
        ret = dotted_name(fdef.returns) if fdef is not None and fdef.returns is not None else None
        if ret and ret.startswith("T.") and ret[2:] in DTYPE_NAMES:
            return relax.PrimStructInfo(ret[2:])
        return relax.TupleStructInfo([])

    def _op_call(self, op, node: ast.Call, name: str):
        from ..ir.op import OpError
        from ..ir.op.api import arg_sinfos, canonicalize_call, coerce_arg

        # Positional arguments bind in the order of TVM's Python function (what TVM's parser
        # calls): ``R.nn.pad(x, [1, 1], "reflect")`` gives pad_mode, printed after pad_value.
        params = list(op.py_signature or (list(op.args) + [a.name for a in op.attrs]))
        defaults = {a.name: _DEFAULT for a in op.params if a.optional}
        defaults.update({a.name: _DEFAULT for a in op.attrs})
        bound = bind_arguments(self.ctx, node, name, params, defaults)
        args = []
        skipped = None
        for spec in op.params:
            raw = bound[spec.name]
            if raw is _DEFAULT:
                skipped = spec
                continue
            if skipped is not None:
                raise self.error(f"{name}: '{spec.name}' is given but the optional '{skipped.name}' before it is not", raw)
            try:
                args.append(coerce_arg(spec, self.expr(raw), f"{name}: {spec.name}"))
            except OpError as err:
                raise self.error(err.message, raw) from None
        attrs = {}
        for a in op.attrs:
            raw = bound[a.name]
            value = a.default if raw is _DEFAULT else self._attr_value(raw)
            if a.convert is not None:
                try:
                    value = a.convert(value)
                except OpError as err:
                    raise self.error(f"{name}: {err.message}", raw if raw is not _DEFAULT else node) from None
            attrs[a.name] = value
        try:
            args, attrs = canonicalize_call(op, args, attrs)
            sinfo = op.infer(arg_sinfos(op, args), attrs)
        except OpError as err:
            where = bound.get(err.arg) if err.arg in bound and bound[err.arg] is not _DEFAULT else node
            raise self.error(f"{name}: {err.message}", where) from None
        return relax.Call(relax.Op(op.name), args, attrs, [], sinfo, self.ctx.span(node))

    def _attr_value(self, node):
        """An op attribute's value: a literal (`attr_literal`), or an index map written as
        ``lambda i: (i // 4, i % 4)`` or, as TVM prints it, ``T.index_map(lambda i: ...)``
        (``R.layout_transform``): an `IndexMap` of int64 variables whose body the TIR builder
        reads."""
        if isinstance(node, ast.Call) and dotted_name(node.func) == "T.index_map" and len(node.args) == 1:
            node = node.args[0]
        if not isinstance(node, ast.Lambda):
            return attr_literal(self.ctx, node)
        from .tir_builder import PrimFuncBuilder

        tb = PrimFuncBuilder(self.ctx)
        tb.scope.push()
        params = [tir.Var("int64", p, self.ctx.span(node)) for p in node.params]
        for p in params:
            tb.scope.define(p.name, p)
        body = node.body.elts if isinstance(node.body, ast.Tuple) else [node.body]
        return IndexMap(params, [tb.expr(e) for e in body])


_DEFAULT = object()


# Methods of TVM's Relax values (relax/expr.py) and the ops they call.
_METHOD_OPS = {"astype": "astype"}


_SPECIAL_FLOATS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def typed_number(ctx: Context, node):
    """The `tir.IntImm`/`tir.FloatImm` a typed literal ``T.float32(0.5)``, ``T.int64(3)`` or
    ``T.float64("-inf")`` stands for, as TVM prints numbers of a given dtype; None when
    ``node`` is not one. A number of the wrong kind (``T.int32(0.5)``) is an error."""
    if not isinstance(node, ast.Call) or node.keywords or len(node.args) not in (1, 2):
        return None
    name = dotted_name(node.func)
    if name in ("T.FloatImm", "T.IntImm", "tir.FloatImm", "tir.IntImm") and len(node.args) == 2 and not node.keywords:
        dtype, value = literal(ctx, node.args[0]), literal(ctx, node.args[1])  # T.FloatImm("float32", 0.1)
        if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype) or not isinstance(value, (int, float)):
            raise ctx.error(f"{name} takes a dtype and a number", node)
        return tir.FloatImm(dtype, float(value)) if name.endswith("FloatImm") else tir.IntImm(dtype, int(value))
    if not name or not name.startswith("T.") or not tir.is_valid_dtype(name[2:]) or name[2:] == "bool" \
            or len(node.args) != 1:
        return None
    arg = node.args[0]
    literal_like = (isinstance(arg, ast.Constant) or (isinstance(arg, ast.Name) and arg.id in ("True", "False", "None"))
                    or (isinstance(arg, ast.UnaryOp) and isinstance(arg.operand, ast.Constant)))
    if not literal_like:
        return None  # T.int64(n): a cast of a symbolic value, not a typed literal
    dtype = name[2:]
    value = literal(ctx, arg)
    if isinstance(value, str) and tir.is_float(dtype) and value in _SPECIAL_FLOATS:
        value = _SPECIAL_FLOATS[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.error(f"{name}() takes a number here, not {value!r}", node.args[0])
    if tir.is_float(dtype):
        return tir.FloatImm(dtype, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise ctx.error(f"{name}() takes an integer, not {value!r}", node.args[0])
    return tir.IntImm(dtype, int(value))


def attr_literal(ctx: Context, node):
    """An op attribute's value: a Python literal, where TVM's typed numbers
    (``scale=T.float32(0.5)``, as TVM 0.27 prints float attributes) stand for their value."""
    number = typed_number(ctx, node)
    if number is not None:
        return number.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [attr_literal(ctx, e) for e in node.elts]
    return literal(ctx, node)


def _py_to_relax(value):
    """A Python value (from the scope around TVMScript in Python) as a Relax expression, or
    None if it has no Relax meaning."""
    if isinstance(value, (relax.Constant, ir.GlobalVar)):
        return value
    if isinstance(value, bool):
        e = tir.IntImm("bool", int(value))
    elif isinstance(value, int):
        e = tir.IntImm("int64", value)
    elif isinstance(value, float):
        e = tir.FloatImm("float64", value)
    elif isinstance(value, tir.PrimExpr):
        e = value
    elif isinstance(value, str):
        return relax.StringImm(value, relax.ObjectStructInfo())
    elif isinstance(value, tuple):
        fields = [_py_to_relax(v) for v in value]
        if any(f is None for f in fields):
            return None
        return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    else:
        return None
    return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))


# TVM's Relax expressions overload Python's operators with these ops (relax/expr.py).
_BINARY_OPS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "//": "floor_divide",
               "**": "power", "%": "floor_mod", ">": "greater", "<": "less", ">=": "greater_equal",
               "<=": "less_equal"}
_UNARY_OPS = {"-": "negative"}


def _operator_call(node):
    """``x + y`` as the syntax of the call ``R.add(x, y)`` it stands for; None if the
    operator has no Relax op."""
    if isinstance(node, ast.BinOp):
        op, args = _BINARY_OPS.get(node.op), [node.left, node.right]
    elif isinstance(node, ast.UnaryOp):
        op, args = _UNARY_OPS.get(node.op), [node.operand]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, args = _BINARY_OPS.get(node.ops[0]), [node.left, node.comparators[0]]
    else:
        return None
    if op is None:
        return None
    at = (node.line, node.col, node.end_line, node.end_col)
    func = ast.Attribute(ast.Name("R", *at), op, *at)
    return ast.Call(func, args, [], *at)


def const_sinfo(array) -> relax.TensorStructInfo:
    return relax.TensorStructInfo([tir.IntImm("int64", d) for d in array.shape], str(array.dtype))
