"""TensorIR loops and blocks, the iteration structure of a prim_func.

Loops: ``T.grid`` (with ``*A.shape``), ``range``, ``T.serial``, ``T.parallel``, ``T.vectorized``,
``T.unroll``, ``T.thread_binding``, with their annotations and steps. With-scopes: ``T.block``,
whose declarations (``T.axis.*`` and ``T.axis.remap`` here; ``T.reads``/``T.writes``, ``T.where``,
``T.block_attr``, ``T.alloc_buffer``, statements of its body, in tir_statements.py; ``T.init``)
collect in a `BlockFrame`; the reads and writes a block does not declare are inferred from its
body, as TVM's parser does (`infer_access_regions`, tvmscript/ir/tir_analysis.py). Also ``with T.attr``,
``T.launch_thread``, and ``T.LetStmt``/``T.Assert``, how TVM prints a let or an assert that is
not the last statement of its body.
"""

from __future__ import annotations

from ..ir import tir
from ..ir.tir_analysis import infer_access_regions
from ..ir.tir_visitor import vars_in
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .tir_attrs import attr_chain
from .tir_expressions import folded_sub
from .tir_frames import BlockFrame
from .tir_names import ITER_KIND_LETTERS, LOOP_KINDS, THREAD_TAGS


class TIRBlocks:
    """The loops and with-scopes of `PrimFuncBuilder` (tir_builder.py)."""

    def _for(self, s: ast.For):
        it = s.iter
        if not isinstance(it, ast.Call):
            raise self.error("expected T.grid(...), range(...), T.serial(...), T.parallel(...), ...", it)
        name = dotted_name(it.func)
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.error("a loop variable must be a name", t)
        if name == "T.grid":
            if it.keywords:
                raise self.error("T.grid() takes no keyword arguments", it.keywords[0])
            extents = self._grid_extents(it.args)
            if len(targets) == 1 and len(extents) > 1 and not isinstance(s.target, ast.Tuple):
                # ``for iters in T.grid(m, n)``: one name for the tuple of loop variables,
                # which are ``iters_0``, ``iters_1``, ... (as TVM names them).
                group = targets[0]
                targets = [ast.Name(f"{group.id}_{k}", group.line, group.col, group.end_line, group.end_col)
                           for k in range(len(extents))]
            else:
                group = None
            if len(extents) != len(targets):
                raise self.error(
                    f"T.grid has {len(extents)} extent{'s' if len(extents) != 1 else ''} but the loop "
                    f"binds {len(targets)} variable{'s' if len(targets) != 1 else ''}", it
                )
            ranges = [(None, e) for e in extents]
            kind, tag, annotations, step = "serial", None, {}, None
        elif name in LOOP_KINDS:
            group = None
            if len(targets) != 1:
                raise self.error(f"{name} binds one loop variable, not {len(targets)}", s.target)
            kind = LOOP_KINDS[name]
            params = ["start", "stop"]
            defaults = {"stop": None, "annotations": None, "step": None}
            if kind == "thread_binding":
                params += ["thread", "annotations"]
                defaults["thread"] = None
            elif name != "range":
                params += ["annotations", "step"]
            else:
                params += ["step"]
            args = bind_arguments(self.ctx, it, name, params, defaults)
            if kind == "thread_binding" and isinstance(args["stop"], ast.Constant) and isinstance(args["stop"].value, str):
                # ``T.thread_binding(128, "threadIdx.x")``: the thread given second, positionally.
                if args["thread"] is not None:
                    raise self.error("T.thread_binding() got two thread tags", args["thread"])
                args["thread"], args["stop"] = args["stop"], None
            step = self._extent(args["step"]) if args.get("step") is not None else None
            start, stop = args["start"], args["stop"]
            if stop is None:
                lo, extent = None, self._extent(start)
            else:
                lo, hi = self._extent(start), self._extent(stop)
                lo, hi = self._unify(lo, hi)
                extent = folded_sub(hi, lo)
            ranges = [(lo, extent)]
            tag = None
            if kind == "thread_binding":
                if args.get("thread") is None:
                    raise self.error("T.thread_binding() needs thread=\"threadIdx.x\" (or another thread tag)", it)
                tag = literal(self.ctx, args["thread"])
                if not isinstance(tag, str) or tag not in THREAD_TAGS:
                    raise self.error(f"unknown thread tag '{tag}'", args["thread"])
            annotations = self._attr_dict(args["annotations"]) if args.get("annotations") is not None else {}
            if step is not None:
                step = self._coerce(step, extent.dtype, args["step"])
        else:
            raise self.error(
                f"unknown loop kind '{name}': expected T.grid, range, T.serial, T.parallel, "
                "T.vectorized, T.unroll or T.thread_binding", it.func
            )
        self.scope.push()
        loop_vars = []
        for t, (lo, extent) in zip(targets, ranges):
            var = tir.Var(extent.dtype, t.id, self.ctx.span(t))
            self.scope.define(t.id, var)
            self.loop_ranges[var] = (lo if lo is not None else tir.IntImm(extent.dtype, 0), extent)
            loop_vars.append(var)
        if group is not None:
            self.scope.define(group.id, tuple(loop_vars))
        body = self.body(s.body)
        self.scope.pop()
        for var, (lo, extent) in reversed(list(zip(loop_vars, ranges))):
            body = tir.For(var, lo if lo is not None else tir.IntImm(extent.dtype, 0), extent, kind, body, tag,
                           annotations, step)
        return body

    def _grid_extents(self, args: list) -> list[tir.PrimExpr]:
        """The extents of ``T.grid(...)``, with ``*A.shape`` (a buffer's dimensions) or
        ``*shape`` (a tuple from the Python scope) spread into several."""
        out = []
        for a in args:
            if not isinstance(a, ast.Starred):
                out.append(self._extent(a))
                continue
            v = a.value
            if isinstance(v, ast.Attribute) and v.attr == "shape":
                out.extend(self._lookup_buffer(v.value).shape)
            elif isinstance(v, (ast.Tuple, ast.List)):
                out.extend(self._extent(e) for e in v.elts)
            elif isinstance(v, ast.Name) and isinstance(self.ctx.py_value(v.id), (tuple, list)):
                out.extend(self._py_shape(v))
            else:
                raise self.error("T.grid(*...) spreads a buffer's shape (*A.shape) or a tuple", a)
        return out

    def _extent(self, node) -> tir.PrimExpr:
        e = self.expr(node)
        if not tir.is_int(e.dtype):
            raise self.error(f"a loop extent must be an integer, not {e.dtype}", node)
        return e

    # ------------------------------------------------------------------ with-scopes
    def _with(self, s: ast.With, function_level: bool):
        item = s.item
        name = dotted_name(item.func) if isinstance(item, ast.Call) else dotted_name(item)
        if name == "T.block":
            return self._block(s)
        if name == "T.init":
            frame = self.blocks[-1] if self.blocks else None
            if frame is None or not isinstance(frame.node, ast.With):
                raise self.error("T.init() is only allowed inside a T.block", item)
            if frame.init is not None:
                raise self.error("a block has one T.init()", item)
            frame.init = self._nested_body(s.body)
            return None
        if name == "T.attr" and isinstance(item, ast.Call):
            attrs = self._attr_stmts(item)
            return attr_chain(attrs, self._nested_body(s.body))
        if name == "T.launch_thread" and isinstance(item, ast.Call):
            # ``with T.launch_thread(tx, 32):`` or ``with T.launch_thread("blockIdx.z", 196) as bz:``
            var_name = s.target.id if isinstance(s.target, ast.Name) else None
            iv, extent = self._launch_thread(item, var_name, s.target)
            self.scope.push()
            try:
                if var_name is not None:
                    self.scope.define(var_name, iv.var)
                body = self.body(s.body)
            finally:
                self.scope.pop()
            return tir.AttrStmt(iv, "thread_extent", extent, body)
        if name in ("T.LetStmt", "T.Assert") and isinstance(item, ast.Call):
            # How TVM prints a let or an assert that is not the last statement of its body.
            return self._scoped_with(s, name)
        raise self.error(f"unknown scope '{name}': expected T.block(...) or T.init()", item)

    def _scoped_with(self, s: ast.With, name: str):
        item = s.item
        if name == "T.Assert":
            args = bind_arguments(self.ctx, item, name, ["condition", "message"])
            cond = self._condition(args["condition"])
            msg, kind, parts = self._assert_message(args["message"])
            return tir.AssertStmt(cond, msg, self._nested_body(s.body), kind, parts)
        args = bind_arguments(self.ctx, item, name, ["value", "type_annotation"], {"type_annotation": None})
        if not isinstance(s.target, ast.Name):
            raise self.error("T.LetStmt binds a variable: with T.LetStmt(value) as x:", item)
        value = self.expr(args["value"])
        if args["type_annotation"] is not None:
            value = self._coerce(value, self._dtype(args["type_annotation"]), args["value"])
        var = tir.Var(value.dtype, s.target.id, self.ctx.span(s.target))
        self.scope.push()
        self.scope.define(var.name, var)
        try:
            body = self.body(s.body)
        finally:
            self.scope.pop()
        return tir.LetStmt(var, value, body)

    def _block(self, s: ast.With):
        call = s.item
        args = bind_arguments(self.ctx, call, "T.block", ["name", "no_realize"], {"name": None, "no_realize": None}) if isinstance(call, ast.Call) else {"name": None}
        block_name = literal(self.ctx, args["name"]) if args["name"] is not None else ""
        if not isinstance(block_name, str):
            raise self.error("a block name must be a string", args["name"])
        frame = BlockFrame(block_name, s)
        self.blocks.append(frame)
        self.scope.push()
        saved_pending, self._pending = self._pending, []
        body = self.body(s.body)
        self._pending = saved_pending + self._pending
        self.scope.pop()
        self.blocks.pop()
        reads, writes = frame.reads, frame.writes
        if reads is None or writes is None:
            inferred_reads, inferred_writes = infer_access_regions(body, frame.init, frame.alloc_buffers)
            # A buffer matched in this block is a view of its source region: what the block
            # touches through it, it touches in the source (as TVM completes it).
            sources = {m.buffer: m.source for m in frame.match_buffers}
            inferred_reads = _dedup_regions([sources.get(r.buffer, r) for r in inferred_reads])
            inferred_writes = _dedup_regions([sources.get(r.buffer, r) for r in inferred_writes])
            if reads is None:
                reads = inferred_reads
            if writes is None:
                writes = inferred_writes
        block = tir.Block(
            block_name, frame.iter_vars, reads, writes, body, frame.init, frame.alloc_buffers,
            frame.match_buffers, frame.annotations, span=self.ctx.span(s.item),
        )
        predicate = frame.predicate if frame.predicate is not None else tir.IntImm("bool", 1)
        return tir.BlockRealize(frame.iter_values, predicate, block)

    # ------------------------------------------------------------------ block axes
    def _axis(self, name: str, target, call: ast.Call, kind: str):
        frame = self.blocks[-1] if self.blocks else None
        if frame is None or not isinstance(frame.node, ast.With):
            raise self.error("block axes (T.axis.*) are only allowed inside a T.block", call)
        args = bind_arguments(self.ctx, call, dotted_name(call.func), ["dom", "binding", "dtype"], {"dtype": None})
        dom_node = args["dom"]
        if isinstance(dom_node, ast.Tuple) and len(dom_node.elts) == 2:
            lo, hi = (self.expr(e) for e in dom_node.elts)
            lo, hi = self._unify(lo, hi)
            dom = tir.Range(lo, folded_sub(hi, lo))
        else:
            extent = self._extent(dom_node)
            dom = tir.Range(tir.IntImm(extent.dtype, 0), extent)
        value = self.expr(args["binding"])
        self._check_not_own_axes(frame, name, [value], args["binding"])
        self._check_not_own_axes(frame, name, [dom.min, dom.extent], dom_node)
        dtype = value.dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        dom = _range_as(dom, dtype)
        var = tir.Var(dtype, name, self.ctx.span(target))
        frame.iter_vars.append(tir.IterVar(var, dom, kind))
        frame.iter_values.append(self._coerce(value, dtype, args["binding"]))
        self.scope.define(name, var)
        return None

    def _check_not_own_axes(self, frame, name: str, exprs: list, node) -> None:
        """A block axis is bound to (and ranges over) values from outside the block: one that
        used an axis of the same block would be bound to itself, which no printer can write
        back (the value is printed before the axis it names is defined)."""
        own = {id(iv.var) for iv in frame.iter_vars}
        used = [v for v in vars_in(exprs) if id(v) in own]
        if used:
            raise self.error(f"block axis '{name}' is defined by '{used[0].name}', an axis of the same block; "
                             "block axes are bound to loop variables (or values from outside the block)", node)

    def _axis_remap(self, target: ast.Tuple, call: ast.Call):
        frame = self.blocks[-1] if self.blocks else None
        if frame is None or not isinstance(frame.node, ast.With):
            raise self.error("T.axis.remap is only allowed inside a T.block", call)
        if len(call.args) > 2:
            raise self.error(
                f"T.axis.remap() takes 2 positional arguments (kinds, [loop variables]) but {len(call.args)} were given",
                call.args[2],
            )
        args = bind_arguments(self.ctx, call, "T.axis.remap", ["kinds", "bindings", "dtype"], {"dtype": None})
        if args["dtype"] is not None:
            self._dtype(args["dtype"])
        kinds = literal(self.ctx, args["kinds"])
        if not isinstance(kinds, str):
            raise self.error("T.axis.remap kinds must be a string such as \"SSR\"", args["kinds"])
        bindings_node = args["bindings"]
        if isinstance(bindings_node, ast.Name) and isinstance(self.scope.lookup(bindings_node.id), tuple):
            # ``T.axis.remap("SS", iters)``, iters bound by ``for iters in T.grid(m, n)``.
            n = bindings_node
            bindings_node = ast.List([ast.Name(v.name, n.line, n.col, n.end_line, n.end_col)
                                      for v in self.scope.lookup(n.id)], n.line, n.col, n.end_line, n.end_col)
        if not isinstance(bindings_node, (ast.List, ast.Tuple)):
            raise self.error("T.axis.remap expects a list of loop variables", bindings_node)
        names = target.elts
        if len(kinds) != len(bindings_node.elts) or len(kinds) != len(names):
            raise self.error(
                f"T.axis.remap kinds \"{kinds}\" ({len(kinds)}) do not match the {len(names)} variables "
                f"and {len(bindings_node.elts)} bindings",
                args["kinds"],
            )
        for k, n, b in zip(kinds, names, bindings_node.elts):
            if k not in ITER_KIND_LETTERS:
                raise self.error(f"unknown axis kind '{k}' in T.axis.remap (expected S or R)", args["kinds"])
            if not isinstance(n, ast.Name):
                raise self.error("expected a variable name", n)
            value = self.expr(b)
            if not isinstance(value, tir.Var) or value not in self.loop_ranges:
                raise self.error("T.axis.remap binds loop variables; use T.axis.spatial/reduce for expressions", b)
            lo, extent = self.loop_ranges[value]
            var = tir.Var(value.dtype, n.id, self.ctx.span(n))
            frame.iter_vars.append(tir.IterVar(var, tir.Range(lo, extent), k))
            frame.iter_values.append(value)
            self.scope.define(n.id, var)
        return None


def _dedup_regions(regions: list) -> list:
    out: list = []
    for r in regions:
        if not any(o is r for o in out):
            out.append(r)
    return out


def _range_as(r: tir.Range, dtype: str) -> tir.Range:
    def conv(e):
        if e.dtype == dtype:
            return e
        if isinstance(e, tir.IntImm):
            return tir.IntImm(dtype, e.value)
        return tir.Cast(dtype, e)
    return tir.Range(conv(r.min), conv(r.extent))
