"""Relax struct info annotations: ``R.Tensor``, ``R.Tuple``, ``R.Shape``, ``R.Object``,
``R.Prim``, ``R.Callable`` (and TVM 0.25+'s ``T.int64`` for a primitive value), their dimensions
(ints, symbolic names, quoted expressions such as ``"n // 2"``, expressions of symbolic dims
read as TIR) and virtual devices; symbolic variables (``n = T.int64()``).

Also the relations between struct infos the builder needs: whether an annotation contradicts
the inferred struct info (`sinfo_conflict`, used by `tvms check` too) and the struct info that
describes both branches of an ``if`` (`unify_sinfo`).
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from ..diagnostics import did_you_mean
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .tir_names import DTYPE_NAMES


# The struct info constructors, for the language server (`sinfo` reads each by name).
SINFO_NAMES = ("R.Tensor", "R.Tuple", "R.Shape", "R.Object", "R.Prim", "R.Callable")


class RelaxStructInfo:
    """The struct info annotations of `RelaxFunctionBuilder` (relax_builder.py)."""

    def sinfo(self, node, defining: bool = False) -> relax.StructInfo:
        name = dotted_name(node.func) if isinstance(node, ast.Call) else dotted_name(node)
        if name == "R.Tensor":
            if not isinstance(node, ast.Call):
                return relax.TensorStructInfo(None, "", -1)
            # TVM's order: R.Tensor(shape, dtype, vdevice, ndim); an int third argument is the
            # ndim of older TVMScript.
            args = bind_arguments(self.ctx, node, "R.Tensor", ["shape", "dtype", "vdevice", "ndim"],
                                  {"shape": None, "dtype": None, "ndim": None, "vdevice": None})
            if isinstance(args["shape"], ast.Constant) and isinstance(args["shape"].value, str) \
                    and args["dtype"] is None:
                args["shape"], args["dtype"] = None, args["shape"]  # R.Tensor("float32", ndim=2)
            third = args["vdevice"]
            if isinstance(third, ast.Constant) and isinstance(third.value, int) and args["ndim"] is None:
                args["vdevice"], args["ndim"] = None, third
            shape = None
            if args["shape"] is not None and not (isinstance(args["shape"], ast.Name) and args["shape"].id == "None"):
                shape_node = args["shape"]
                py_shape = self.ctx.py_value(shape_node.id) if isinstance(shape_node, ast.Name) else None
                if isinstance(py_shape, (tuple, list)):
                    shape = self._py_shape(shape_node, py_shape)
                elif not isinstance(shape_node, (ast.Tuple, ast.List)):
                    raise self.error("R.Tensor shape must be a tuple such as (1, 784)", shape_node)
                else:
                    shape = [self._shape_dim(e, defining) for e in shape_node.elts]
            dtype = ""
            if args["dtype"] is not None:
                d = literal(self.ctx, args["dtype"])
                if d is not None:
                    if not isinstance(d, str) or not (tir.is_valid_dtype(d)):
                        raise self.error(f"unknown dtype '{d}'", args["dtype"], did_you_mean(str(d), tir.SCALAR_DTYPES))
                    dtype = "" if d == "void" else d
            ndim = -1
            if args["ndim"] is not None:
                ndim = literal(self.ctx, args["ndim"])
                if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
                    raise self.error("ndim must be a non-negative integer", args["ndim"])
                if shape is not None and ndim != len(shape):
                    raise self.error(f"ndim={ndim} does not match the shape's {len(shape)} dimensions", args["ndim"])
            vdevice = self._vdevice(args["vdevice"]) if args["vdevice"] is not None else None
            return relax.TensorStructInfo(shape, dtype, ndim if shape is None else len(shape), vdevice)
        if name == "R.Tuple":
            if not isinstance(node, ast.Call):
                return relax.TupleStructInfo([])
            if node.keywords:
                raise self.error("R.Tuple() takes no keyword arguments", node.keywords[0])
            fields = node.args
            if len(fields) == 1 and isinstance(fields[0], ast.List):
                fields = fields[0].elts  # R.Tuple([R.Tensor(...), ...]), TVM's list form
            return relax.TupleStructInfo([self.sinfo(a, defining) for a in fields])
        if name == "R.Shape":
            if not isinstance(node, ast.Call):
                return relax.ShapeStructInfo(None, -1)
            args = bind_arguments(self.ctx, node, "R.Shape", ["values", "ndim"], {"values": None, "ndim": None})
            if args["values"] is not None:
                vals = args["values"]
                if not isinstance(vals, (ast.List, ast.Tuple)):
                    raise self.error("R.Shape values must be a list", vals)
                return relax.ShapeStructInfo([self.dim(e, defining) for e in vals.elts])
            ndim = literal(self.ctx, args["ndim"]) if args["ndim"] is not None else -1
            if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
                raise self.error("ndim must be a non-negative integer", args["ndim"])
            return relax.ShapeStructInfo(None, ndim)
        if isinstance(node, ast.Name) and node.id == "None":
            return relax.TupleStructInfo([])  # -> None: nothing, as TVM reads it (R.Tuple)
        if name in ("R.Object", "R.Any"):
            return relax.ObjectStructInfo()
        if name == "R.Callable":
            return self._callable_sinfo(node, defining)
        if isinstance(node, ast.Attribute) and node.attr in ("ty", "struct_info") and isinstance(node.value, ast.Name):
            var = self.scope.lookup(node.value.id)  # x.ty, x.struct_info: the struct info of x
            if isinstance(var, relax.Var):
                return relax.struct_info_of(var)
        if name and name.startswith("T.") and name[2:] in DTYPE_NAMES and not isinstance(node, ast.Call):
            # TVM 0.25+ writes a primitive value's struct info as its TIR type: `n: T.int64`.
            return relax.PrimStructInfo(name[2:])
        if name == "R.Prim":
            if not isinstance(node, ast.Call):
                raise self.error("R.Prim needs a dtype, e.g. R.Prim(\"int64\")", node)
            args = bind_arguments(self.ctx, node, "R.Prim", ["dtype", "value"], {"dtype": None, "value": None})
            if args["value"] is not None:
                value = _typed_int_constant(self.ctx, args["value"]) or self.dim(args["value"], defining)
                return relax.PrimStructInfo(value.dtype, value)
            dtype = literal(self.ctx, args["dtype"]) if args["dtype"] is not None else "int64"
            if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
                raise self.error(f"unknown dtype '{dtype}'", args["dtype"])
            return relax.PrimStructInfo(dtype)
        raise self.error("expected a struct info annotation such as R.Tensor((1, 784), \"float32\")", node)

    def _shape_dim(self, node, defining: bool) -> tir.PrimExpr:
        """A dimension of a tensor's shape: an int64 value, as TVM requires of Relax shapes
        (``n = T.int32()`` used as one is an error there too)."""
        d = self.dim(node, defining)
        if d.dtype != "int64":
            raise self.error(f"a tensor's dimensions are int64 values; this one is {d.dtype}", node)
        return d

    def _callable_sinfo(self, node, defining: bool) -> relax.FuncStructInfo:
        """``R.Callable`` (an opaque function) or ``R.Callable((params...), ret, purity)``."""
        if not isinstance(node, ast.Call):
            return relax.FuncStructInfo(None, relax.ObjectStructInfo(), True)
        args = bind_arguments(self.ctx, node, "R.Callable", ["params", "ret", "purity", "derive_func"],
                              {"params": None, "ret": None, "purity": None, "derive_func": None})
        params = None
        if args["params"] is not None:
            if not isinstance(args["params"], (ast.Tuple, ast.List)):
                raise self.error("R.Callable's parameters are a tuple of struct infos", args["params"])
            params = [self.sinfo(p, defining) for p in args["params"].elts]
        ret = self.sinfo(args["ret"], defining) if args["ret"] is not None else relax.ObjectStructInfo()
        purity = literal(self.ctx, args["purity"]) if args["purity"] is not None else True
        if not isinstance(purity, bool):
            raise self.error("R.Callable's purity is True or False", args["purity"])
        return relax.FuncStructInfo(params, ret, purity)

    # ------------------------------------------------------------------ dimensions
    def dim(self, node, defining: bool) -> tir.PrimExpr:
        """A dimension in an annotation: an int, a symbolic name ("n" or n), or an expression."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return tir.IntImm("int64", node.value)
        if isinstance(node, ast.UnaryOp) and node.op in ("-", "+") and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, int) and not isinstance(node.operand.value, bool):
            # `+1` too: read as TIR it would be an int32, which prints as T.int32(1).
            v = node.operand.value
            return tir.IntImm("int64", -v if node.op == "-" else v)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not node.value.isidentifier():
            return self._quoted_dim_expr(node, defining)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            var = self.sym_vars.get(node.value)
            if var is None:
                var = tir.Var("int64", node.value, self.ctx.span(node))
                self.sym_vars[node.value] = var
            return var
        if isinstance(node, ast.Name):
            var = self.sym_vars.get(node.id)
            if var is None:
                var = self._py_dim(node.id)
            if var is None:
                raise self.error(f"undefined symbolic dimension '{node.id}' (declare it with {node.id} = T.int64() or write \"{node.id}\")", node)
            return var
        if isinstance(node, ast.Call) and dotted_name(node.func) in ("T.int64", "T.int32") and len(node.args) == 1:
            v = literal(self.ctx, node.args[0])
            if not isinstance(v, int) or isinstance(v, bool):
                raise self.error(f"{dotted_name(node.func)}() in a shape takes an integer", node.args[0])
            return tir.IntImm("int64", v)
        if isinstance(node, ast.BinOp) and node.op in ("+", "-", "*", "//", "%"):
            a, b = self.dim(node.left, defining), self.dim(node.right, defining)
            cls = {"+": tir.Add, "-": tir.Sub, "*": tir.Mul, "//": tir.FloorDiv, "%": tir.FloorMod}[node.op]
            return cls("int64", _int64_constant(a), _int64_constant(b))
        if isinstance(node, (ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.IfExp)):
            return _int64_constant(self._tir_dim(node))
        raise self.error("expected a dimension: an integer or a symbolic name", node)

    def _tir_dim(self, node) -> tir.PrimExpr:
        """Any other expression of symbolic dims (``T.max(m, 20)``, ``N % 16 == 0``, a cast):
        read as TIR, with this function's symbolic variables in scope, by the TIR builder."""
        from .tir_builder import PrimFuncBuilder

        tb = PrimFuncBuilder(self.ctx)
        tb.scope.push()
        for name, var in self.sym_vars.items():
            tb.scope.define(name, var)
        return tb.expr(node)

    def _quoted_dim_expr(self, node, defining: bool) -> tir.PrimExpr:
        """``"n // 2 + 1"``: an expression of symbolic dims in quotes, as printers write it in a
        signature (where the names are not declared yet). Names in it are quoted names."""
        from .syntax import parse_syntax

        try:
            (stmt,), _ = parse_syntax(node.value + "\n", "<dimension>")
        except Exception:  # noqa: BLE001 - reported below at the string's place
            stmt = None
        if not isinstance(stmt, ast.ExprStmt):
            raise self.error(f"expected a dimension: {node.value!r} is neither a name nor an expression", node)
        expr = stmt.value
        for sub in ast.walk(expr):
            # Errors inside the string point at the string; a name in it is a symbolic dim,
            # introduced here if it is new (the quotes say so).
            sub.line, sub.col, sub.end_line, sub.end_col = node.line, node.col, node.end_line, node.end_col
            if isinstance(sub, ast.Name) and sub.id not in self.sym_vars and not _is_callee(sub, expr):
                self.sym_vars[sub.id] = tir.Var("int64", sub.id, self.ctx.span(node))
        return self.dim(expr, defining)

    def _vdevice(self, node) -> str:
        """A tensor's virtual device in TVM's printed form ``"kind:index:scope"``: from
        ``"cuda"``, ``"cuda:1"`` (the second cuda vdevice), ``"cuda:1:global"``, or
        ``"vdevice:3"`` (the fourth entry of I.module_global_infos' "vdevice" list, named by its
        kind and its index among that kind's vdevices)."""
        text = literal(self.ctx, node)
        if not isinstance(text, str) or not text:
            raise self.error('vdevice must be a string such as "cuda:0" or "vdevice:1"', node)
        parts = text.split(":")
        if len(parts) > 3 or not all(parts) or (len(parts) > 1 and not parts[1].isdigit()):
            raise self.error(f"vdevice {text!r} is not of the form \"kind[:index[:scope]]\"", node)
        kind, index = parts[0], int(parts[1]) if len(parts) > 1 else 0
        scope = parts[2] if len(parts) > 2 else None
        if kind == "vdevice":
            devices = getattr(self.ctx, "global_infos", {}).get("vdevice", [])
            if index >= len(devices):
                raise self.error(f"vdevice {text!r}: the module's global infos have {len(devices)} vdevice(s)", node)
            dev = devices[index]
            kind = ir.vdevice_kind(dev)
            index = sum(1 for d in devices[:index] if ir.vdevice_kind(d) == kind)
            scope = scope or dev.memory_scope
        return f"{kind}:{index}:{scope or 'global'}"

    # ------------------------------------------------------------------ symbolic variables
    def _declare_sym(self, name: str, dtype: str, node) -> None:
        """``n = T.int64()``: a symbolic variable (the one a quoted "n" already introduced,
        which is an int64 shape dimension: declaring it with another dtype is an error, as in
        TVM)."""
        known = self.sym_vars.get(name)
        if known is not None and known.dtype != dtype:
            raise self.error(f"'{name}' is a {known.dtype} dimension of the signature; it cannot be declared "
                             f"T.{dtype}()", node)
        self.sym_vars[name] = known or tir.Var(dtype, name)

    def _py_dim(self, name: str):
        """A dimension named from the enclosing Python scope: an int, or a PrimExpr."""
        value = self.ctx.py_value(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return tir.IntImm("int64", value)
        if isinstance(value, tir.PrimExpr):
            return value
        return None

    def _py_shape(self, node, values) -> list:
        """``R.Tensor(shape, ...)`` with ``shape`` a tuple of the Python scope."""
        dims = []
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool):
                dims.append(tir.IntImm("int64", v))
            elif isinstance(v, tir.PrimExpr):
                dims.append(v)
            else:
                raise self.error(f"'{node.id}' is not a shape: it holds {v!r}", node)
        return dims

    # ------------------------------------------------------------------ checking an annotation
    def check_annotation(self, ann, inferred, node, what: str) -> None:
        problem = sinfo_conflict(ann, inferred)
        if problem:
            from ..printer import sinfo_text

            raise self.error(
                f"annotation of '{what}' contradicts its inferred struct info: {problem}",
                node,
                [f"inferred: {sinfo_text(inferred)}", f"annotated: {sinfo_text(ann)}"],
            )


def _typed_int_constant(ctx, node):
    """``T.int32(5)`` as an ``R.Prim(value=...)`` keeps its dtype (a dimension would make it an
    int64): the struct info of ``R.prim_value(T.int32(5))``, as the printer writes it. None when
    ``node`` is not such a constant."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    name = dotted_name(node.func) or ""
    dtype = name[2:] if name.startswith("T.") else ""
    if dtype in ("int64", "bool") or dtype not in DTYPE_NAMES or not tir.is_int(dtype):
        return None
    v = literal(ctx, node.args[0], lambda n: None)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return tir.IntImm(dtype, v)


def _int64_constant(e: tir.PrimExpr) -> tir.PrimExpr:
    """A dimension's integer constant as int64. Read as TIR (``- -1``, ``2**3``) a constant is
    an int32, which prints as ``T.int32(1)``, and that, in a dimension, reads back as an int64:
    the text would not round-trip."""
    if isinstance(e, tir.IntImm) and e.dtype in ("int8", "int16", "int32"):
        return tir.IntImm("int64", e.value)
    return e


def _is_callee(name: ast.Name, root) -> bool:
    """Whether ``name`` is the ``T`` of a called ``T.max`` (not a dimension) in ``root``."""
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(root))


# ----------------------------------------------------------------------------- struct info relations


def sinfo_conflict(ann, inferred) -> str | None:
    """Why an annotation cannot describe a value of the inferred struct info (None if it can)."""
    if isinstance(inferred, relax.ObjectStructInfo) or isinstance(ann, relax.ObjectStructInfo):
        return None
    if type(ann) is not type(inferred):
        return f"{_kind(ann)} vs {_kind(inferred)}"
    if isinstance(ann, relax.TensorStructInfo):
        if ann.dtype and inferred.dtype and ann.dtype != inferred.dtype:
            return f"dtype {ann.dtype} vs {inferred.dtype}"
        if ann.ndim >= 0 and inferred.ndim >= 0 and ann.ndim != inferred.ndim:
            return f"rank {ann.ndim} vs {inferred.ndim}"
        if ann.shape is not None and inferred.shape is not None:
            for i, (a, b) in enumerate(zip(ann.shape, inferred.shape)):
                if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm) and a.value != b.value:
                    return f"dimension {i} is {a.value} vs {b.value}"
        return None
    if isinstance(ann, relax.TupleStructInfo):
        if len(ann.fields) != len(inferred.fields):
            return f"a tuple of {len(ann.fields)} vs a tuple of {len(inferred.fields)}"
        for a, b in zip(ann.fields, inferred.fields):
            p = sinfo_conflict(a, b)
            if p:
                return p
        return None
    if isinstance(ann, relax.ShapeStructInfo):
        if ann.ndim >= 0 and inferred.ndim >= 0 and ann.ndim != inferred.ndim:
            return f"rank {ann.ndim} vs {inferred.ndim}"
        return None
    if isinstance(ann, relax.PrimStructInfo):
        if ann.dtype != inferred.dtype:
            return f"dtype {ann.dtype} vs {inferred.dtype}"
    return None


def _kind(s) -> str:
    return {
        relax.TensorStructInfo: "a tensor", relax.TupleStructInfo: "a tuple", relax.ShapeStructInfo: "a shape",
        relax.PrimStructInfo: "a prim value", relax.FuncStructInfo: "a function",
    }.get(type(s), "an object")


def unify_sinfo(a, b):
    """The most specific struct info describing both ``a`` and ``b``."""
    from ..ir.structural import StructuralEqual

    if StructuralEqual().equal(a, b):
        return a
    if isinstance(a, relax.TensorStructInfo) and isinstance(b, relax.TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else ""
        ndim = a.ndim if a.ndim == b.ndim else -1
        return relax.TensorStructInfo(None, dtype, ndim)
    return relax.ObjectStructInfo()
