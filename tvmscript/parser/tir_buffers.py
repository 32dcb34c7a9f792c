"""TensorIR buffers: their declarations and their accesses, with the types declarations use.

Declarations: ``T.Buffer`` parameters (and older TVM's ``T.Buffer[...]``), ``T.match_buffer`` of a
handle or of another buffer's region, ``T.alloc_buffer`` (and ``T.alloc_shared``...),
``T.decl_buffer`` over existing memory, ``A.view(...)``; their shapes (ints, symbolic dims,
strings naming new ones) and dtypes, and pointer types (``T.handle("float32", "shared")``).
Accesses: loads ``A[i, j]``, stores, vector accesses ``A[i:i + 4]`` and regions ``A[i, 0:16]``.
"""

from __future__ import annotations

from ..ir import tir
from ..diagnostics import did_you_mean
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .tir_expressions import folded_sub
from .tir_frames import Scoped
from .tir_names import DTYPE_ALIASES, DTYPE_NAMES, SCOPED_ALLOCS


class TIRBuffers:
    """The buffers of `PrimFuncBuilder` (tir_builder.py): declarations and accesses."""

    def _buffer_decl(self, name: str, node, default_dtype: str = "float32", kind: str = "T.Buffer") -> tir.Buffer:
        """``T.Buffer(shape, dtype, ...)``, ``T.Buffer[shape, dtype]`` (older TVM) and the
        arguments of ``T.match_buffer`` / ``T.alloc_buffer`` (after the handle)."""
        if isinstance(node, ast.Subscript):
            idx = node.index
            items = idx.elts if isinstance(idx, ast.Tuple) and not idx.parenthesized else [idx]
            fake = ast.Call(node.value, items, [], node.line, node.col, node.end_line, node.end_col)
            node = fake
        args = bind_arguments(
            self.ctx, node, kind,
            ["shape", "dtype", "data", "strides", "elem_offset", "scope", "align", "offset_factor",
             "buffer_type", "axis_separators", "annotations"],
            defaults={"dtype": None, "data": None, "strides": None, "elem_offset": None, "scope": None,
                      "align": None, "offset_factor": None, "buffer_type": None, "axis_separators": None,
                      "annotations": None},
        )
        shape = self._shape(args["shape"])
        dtype = default_dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        buf = tir.Buffer(name, shape, dtype, span=self.ctx.span(node))
        if kind in SCOPED_ALLOCS:
            buf.scope = SCOPED_ALLOCS[kind]
        if args["annotations"] is not None:
            if kind not in ("T.alloc_buffer", *SCOPED_ALLOCS):
                raise self.error(f"{kind}() got an unexpected keyword argument 'annotations'", args["annotations"])
            buf.annotations = self._attr_dict(args["annotations"])
        if args["data"] is not None:
            if kind != "T.decl_buffer":
                raise self.error(f"{kind}() takes no data pointer; T.decl_buffer(..., data=ptr) does", args["data"])
            data = self.expr(args["data"])
            if not isinstance(data, tir.Var) or data.dtype != "handle":
                raise self.error("data must be a handle variable or a buffer's .data", args["data"])
            buf.data = data
        if args["strides"] is not None:
            strides = args["strides"]
            elts = strides.elts if isinstance(strides, (ast.Tuple, ast.List)) else [strides]
            buf.strides = [self._dim(e) for e in elts]
        if args["elem_offset"] is not None:
            buf.elem_offset = self._dim(args["elem_offset"])
        if args["scope"] is not None:
            buf.scope = self._typed_literal(args["scope"], str, "scope", "a string such as \"global\"")
        if args["align"] is not None:
            buf.align = self._typed_literal(args["align"], int, "align", "an integer")
        if args["offset_factor"] is not None:
            buf.offset_factor = self._typed_literal(args["offset_factor"], int, "offset_factor", "an integer")
        if args["axis_separators"] is not None:
            buf.axis_separators = self._typed_literal(args["axis_separators"], list, "axis_separators", "a list of integers")
            if not all(isinstance(a, int) and not isinstance(a, bool) for a in buf.axis_separators):
                raise self.error(f"{kind}(): axis_separators must be a list of integers", args["axis_separators"])
        return buf

    @staticmethod
    def _is_pointer_type(node) -> bool:
        """``T.handle``, ``T.handle("float32", "shared")`` or ``T.Ptr(T.float32)`` used as a
        type (a parameter's or a let's annotation)."""
        if dotted_name(node) == "T.handle":
            return True
        if not isinstance(node, ast.Call) or dotted_name(node.func) not in ("T.handle", "T.Ptr"):
            return False
        if dotted_name(node.func) == "T.Ptr" or not node.args:
            return True
        # T.handle("float32", ...) or T.handle(T.float32): a type; T.handle(x) would be a cast.
        first = node.args[0]
        if isinstance(first, ast.Constant):
            return isinstance(first.value, str)
        name = DTYPE_ALIASES.get(dotted_name(first), dotted_name(first)) or ""
        return name.startswith("T.") and name[2:] in DTYPE_NAMES

    def _pointer(self, node) -> tuple | None:
        """The pointee of a handle type: ``(element dtype, storage scope)``, or None for an
        untyped pointer (``T.handle``, ``T.handle("void")``) as TVM treats them alike."""
        if not isinstance(node, ast.Call):
            return None
        name = dotted_name(node.func)
        args = bind_arguments(self.ctx, node, name, ["dtype", "storage_scope"],
                              {"dtype": None, "storage_scope": None})
        dtype = "void"
        if args["dtype"] is not None:
            d = args["dtype"]
            dtype = "void" if isinstance(d, ast.Constant) and d.value in ("void", "") else self._dtype(d)
        scope = "global"
        if args["storage_scope"] is not None:
            scope = self._typed_literal(args["storage_scope"], str, "storage_scope", 'a string such as "shared"')
        return None if (dtype, scope) == ("void", "global") else (dtype, scope)

    def _typed_literal(self, node, typ, what: str, expected: str):
        value = literal(self.ctx, node)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise self.error(f"{what} must be {expected}", node)
        return value

    def _shape(self, node) -> list:
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) \
                and isinstance(self.scope.lookup(node.value.id), tir.Buffer):
            return list(self.scope.lookup(node.value.id).shape)  # ``T.alloc_buffer(X.shape)``
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self._dim(e) for e in node.elts]
        if isinstance(node, ast.Name) and isinstance(self.ctx.py_value(node.id), (tuple, list)):
            return self._py_shape(node)
        return [self._dim(node)]

    def _py_shape(self, node: ast.Name) -> list:
        """A shape given as a tuple from the Python scope (``shape = (2, 5)`` above)."""
        dims = [self.ctx.py_prim_of(d) for d in self.ctx.py_value(node.id)]
        if any(d is None or not isinstance(d, tir.PrimExpr) or not tir.is_int(d.dtype) for d in dims):
            raise self.error(f"'{node.id}' is not a shape: expected a tuple of integers", node)
        return dims

    def _dim(self, node) -> tir.PrimExpr:
        """A shape dimension: an int, ``T.int64(n)``, a symbolic var, or a string naming one."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # A string names a variable of this function (module-level TypeVars are not it).
            var = next((f[node.value] for f in reversed(self.scope.frames[1:]) if node.value in f), None)
            if var is None:
                var = tir.Var("int64", node.value, self.ctx.span(node))
                self.scope.frames[1 if len(self.scope.frames) > 1 else 0][node.value] = var
                self._named_dims.add(var)
            return var
        value = self.expr(node)
        if not tir.is_int(value.dtype):
            raise self.error(f"a shape dimension must be an integer, not {value.dtype}", node)
        return value

    def _declared_dim(self, name: str, dtype: str):
        """The variable a string dimension (``T.Buffer(("n", 4))``) already introduced under
        ``name``, which a later ``n: T.int32`` parameter or ``n = T.int32()`` declares (TVM
        writes both forms), now of ``dtype``; None if there is none. Shapes of the buffers
        declared so far that computed with it (``(n + 1,)``) are rebuilt in that dtype."""
        var = self.scope.lookup(name)
        if not (isinstance(var, tir.Var) and var in self._named_dims):
            return None
        self._named_dims.discard(var)
        if var.dtype != dtype:
            var.dtype = dtype
            for buf in self.buffer_map.values():
                buf.shape = [_retyped(d) for d in buf.shape]
        return var

    def _dtype(self, node) -> str:
        if isinstance(node, ast.Attribute) and node.attr == "ty" and isinstance(node.value, ast.Call):
            # ``T.int32().ty`` / ``T.handle("float32").ty``: TVM 0.27's spelling of a type.
            callee = dotted_name(node.value.func)
            if callee == "T.handle":
                self._pointer(node.value)  # checked, though only the dtype is kept
                return "handle"
            if callee and callee.startswith("T.") and callee[2:] in DTYPE_NAMES and not node.value.args:
                return callee[2:]
            raise self.error("expected a type such as T.int32().ty or T.handle(\"float32\").ty", node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            dtype = node.value
        else:
            name = DTYPE_ALIASES.get(dotted_name(node), dotted_name(node))
            if name and name.startswith("T.") and name[2:] in DTYPE_NAMES:
                dtype = name[2:]
            elif isinstance(node, ast.Name) and isinstance(self.ctx.py_value(node.id), str):
                dtype = self.ctx.py_value(node.id)  # a dtype string from the Python scope
            else:
                raise self.error("expected a dtype string such as \"float32\"", node)
        if not tir.is_valid_dtype(dtype):
            raise self.error(f"unknown dtype '{dtype}'", node, did_you_mean(dtype, tir.SCALAR_DTYPES))
        return dtype

    def _lookup_buffer(self, node) -> tir.Buffer:
        if isinstance(node, ast.Name):
            value = self.scope.lookup(node.id)
            if value is None:
                value = self.ctx.py_prim(node.id)
            if value is None:
                raise self.error(f"undefined name '{node.id}'", node, did_you_mean(node.id, self._visible_names()))
            if isinstance(value, tir.Buffer):
                return value
            raise self.error(f"'{node.id}' is not a buffer", node)
        raise self.error("expected a buffer", node)

    # ------------------------------------------------------------------ buffers declared by an assignment
    def _is_region(self, node) -> bool:
        """Whether a ``T.match_buffer`` source is a buffer region (``A[i, 0:16]`` or a whole
        buffer ``A``) rather than a function's handle parameter."""
        if isinstance(node, ast.Subscript):
            return True
        return isinstance(node, ast.Name) and isinstance(self.scope.lookup(node.id), tir.Buffer)

    def _match_region(self, name: str, target, call: ast.Call):
        """``A0 = T.match_buffer(A[i, 0:16], (16,))`` inside a block: a new buffer viewing a
        region of another, recorded on the enclosing block (TVM's MatchBufferRegion)."""
        if len(self.blocks) < 2:
            raise self.error("T.match_buffer of a buffer region is only allowed inside a T.block", call)
        source = self._region(call.args[0])
        rest = ast.Call(call.func, call.args[1:], call.keywords, call.line, call.col, call.end_line, call.end_col)
        if len(call.args) == 1 and not any(kw.arg == "shape" for kw in call.keywords):
            # No shape: the region's own (its extents), and the source's dtype unless given.
            buf = tir.Buffer(name, [r.extent for r in source.region], source.buffer.dtype, span=self.ctx.span(call))
            dtype = next((kw.value for kw in call.keywords if kw.arg == "dtype"), None)
            if dtype is not None:
                buf.dtype = self._dtype(dtype)
            if any(kw.arg not in ("dtype",) for kw in call.keywords):
                raise self.error("T.match_buffer of a region without a shape takes only dtype=", call)
        else:
            buf = self._buffer_decl(name, rest, kind="T.match_buffer")
        if buf.data is None:
            buf.data = tir.Var("handle", name, self.ctx.span(target))
        self.blocks[-1].match_buffers.append(tir.MatchBufferRegion(buf, source))
        self.scope.define(name, buf)
        return None

    def _decl_buffer(self, name: str, buf: tir.Buffer):
        self.scope.push()
        self.scope.define(name, buf)
        return Scoped(self.scope, lambda rest: tir.DeclBuffer(buf, rest), push=False)

    def _view(self, name: str, target, call: ast.Call):
        """``B = A.view(256)`` (TVM 0.27's printout): a buffer of another shape (and dtype)
        over ``A``'s memory, i.e. ``T.decl_buffer((256,), data=A.data)``."""
        source = self._lookup_buffer(call.func.value)
        args = bind_arguments(self.ctx, call, f"{source.name}.view", ["shape*", "dtype"], {"dtype": None})
        dims = args["shape"]
        if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
            dims = dims[0].elts
        shape = [self._dim(d) for d in dims]
        dtype = self._dtype(args["dtype"]) if args["dtype"] is not None else source.dtype
        buf = tir.Buffer(name, shape, dtype, scope=source.scope, data=source.data, span=self.ctx.span(call))
        return self._decl_buffer(name, buf)

    # ------------------------------------------------------------------ accesses
    def _subscript(self, node: ast.Subscript):
        buf = self._lookup_buffer(node.value)
        indices = self._indices(buf, node)
        return tir.BufferLoad(_access_dtype(buf, indices), buf, indices, self.ctx.span(node))

    def _store(self, target: ast.Subscript, value_node) -> tir.BufferStore:
        buf = self._lookup_buffer(target.value)
        indices = self._indices(buf, target)
        dtype = _access_dtype(buf, indices)
        value = self.expr(value_node)
        if value.dtype != dtype and id(value) not in self.literals and tir.lanes_of(value.dtype) == tir.lanes_of(dtype) \
                and "handle" not in (value.dtype, dtype):
            # As TVM's parser: a value stored into a buffer of another dtype is cast to it.
            return tir.BufferStore(buf, tir.Cast(dtype, value), indices, self.ctx.span(target))
        return tir.BufferStore(buf, self._coerce(value, dtype, value_node), indices, self.ctx.span(target))

    def _indices(self, buf: tir.Buffer, node: ast.Subscript) -> list:
        idx = node.index
        items = _index_items(idx, buf)
        if len(items) != len(buf.shape):
            raise self.error(
                f"buffer '{buf.name}' has {len(buf.shape)} dimension{'s' if len(buf.shape) != 1 else ''} "
                f"but is indexed with {len(items)} ind{'ices' if len(items) != 1 else 'ex'}",
                node,
            )
        out = []
        for it in items:
            if isinstance(it, ast.Slice) and len(items) == 1 and it.lower is not None and it.upper is not None:
                out.append(self._slice_ramp(it))
                continue
            if isinstance(it, ast.Slice):
                raise self.error("slices are only allowed in buffer regions (T.reads, T.writes, T.match_buffer) "
                                 "and as the one index of a vector access, A[i:i + 4]", it)
            e = self.expr(it)
            if not tir.is_int(e.dtype):
                raise self.error(f"buffer index must be an integer, not {e.dtype}", it)
            out.append(e)
        return out

    def _slice_ramp(self, it) -> tir.Ramp:
        """``A[i:i + 4]``, how TVM prints a vector access ``A[T.Ramp(i, 1, 4)]``: the lanes
        are the slice's constant length."""
        if getattr(it, "step", None) is not None:
            raise self.error("a vector access slice takes no step; write T.Ramp(base, stride, lanes)", it)
        lo, hi = self._unify(self.expr(it.lower), self.expr(it.upper))
        lanes = folded_sub(hi, lo)
        if not isinstance(lanes, tir.IntImm) or lanes.value < 2:
            raise self.error("a vector access slice needs a constant length of at least 2, as in A[i:i + 4]", it)
        return tir.Ramp(f"{lo.dtype}x{lanes.value}", lo, tir.IntImm(lo.dtype, 1), lanes.value)

    def _region(self, node) -> tir.BufferRegion:
        if isinstance(node, ast.Name):
            buf = self._lookup_buffer(node)
            return tir.BufferRegion(buf, [tir.Range(_zero_like(d), d) for d in buf.shape])
        if not isinstance(node, ast.Subscript):
            raise self.error("expected a buffer region such as A[i, 0:16]", node)
        buf = self._lookup_buffer(node.value)
        idx = node.index
        items = _index_items(idx, buf)
        if len(items) != len(buf.shape):
            raise self.error(
                f"buffer '{buf.name}' has {len(buf.shape)} dimensions but the region has {len(items)}", node
            )
        region = []
        for it, dim in zip(items, buf.shape):
            if isinstance(it, ast.Slice):
                lo = self.expr(it.lower) if it.lower is not None else _zero_like(dim)
                hi = self.expr(it.upper) if it.upper is not None else dim
                lo, hi = self._unify(lo, hi)
                self._check_region_bound(lo, it.lower or it)
                region.append(tir.Range(lo, folded_sub(hi, lo)))
            else:
                e = self.expr(it)
                self._check_region_bound(e, it)
                region.append(tir.Range(e, tir.IntImm(e.dtype, 1)))
        return tir.BufferRegion(buf, region)

    def _check_region_bound(self, e: tir.PrimExpr, node) -> None:
        """A region's bounds are indices, so integers (as in `_indices`): a float bound would
        print as a cast the parser then reads as another region."""
        if not tir.is_int(e.dtype):
            raise self.error(f"buffer region bound must be an integer, not {e.dtype}", node)


def _retyped(e):
    """``e`` rebuilt after one of its variables changed dtype: integer operators take their
    operands' dtype again, a constant operand that of the other side (as a literal would)."""
    if isinstance(e, tir.BinaryOp) and not isinstance(e, (tir.And, tir.Or)):
        a, b = _retyped(e.a), _retyped(e.b)
        if a.dtype != b.dtype and isinstance(b, tir.IntImm):
            b = tir.IntImm(a.dtype, b.value)
        elif a.dtype != b.dtype and isinstance(a, tir.IntImm):
            a = tir.IntImm(b.dtype, a.value)
        if a is e.a and b is e.b and a.dtype == e.dtype:
            return e
        dtype = "bool" if isinstance(e, tuple(tir.COMPARISONS)) else a.dtype
        return type(e)(dtype, a, b)
    return e


def _index_items(idx, buf: tir.Buffer) -> list:
    """The indices of ``A[i, j]``; ``A[(i, j)]`` (a parenthesized tuple, as older TVM tests
    write) is the same access when the buffer has that many dimensions."""
    if isinstance(idx, ast.Tuple) and (not idx.parenthesized or (len(idx.elts) == len(buf.shape) != 1)):
        return idx.elts
    return [idx]


def _access_dtype(buf: tir.Buffer, indices: list) -> str:
    """The dtype a buffer access reads or writes: the element dtype, as a vector of as many
    lanes as a vector index (``A[T.Ramp(0, 1, 4)]`` is ``float32x4``) has."""
    for index in indices:
        base, sep, lanes = index.dtype.rpartition("x")
        if sep and lanes.isdigit():
            return f"{buf.dtype}x{lanes}"
    return buf.dtype


def _zero_like(e: tir.PrimExpr) -> tir.IntImm:
    return tir.IntImm(e.dtype, 0)
