"""TensorIR attributes: ``T.attr`` statements, attribute dicts (``T.func_attr``, ``T.block_attr``,
loop annotations) and what their values may be (Python literals, TIR expressions, buffers,
``T.target(...)``, ``T.comm_reducer(...)``); and thread launches (``T.launch_thread``,
``T.env_thread``), which TVM represents as ``"thread_extent"`` AttrStmts over a thread IterVar.
"""

from __future__ import annotations

from ..ir import tir
from ..diagnostics import did_you_mean
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .tir_names import THREAD_TAGS


class TIRAttrs:
    """The attributes and thread launches of `PrimFuncBuilder` (tir_builder.py)."""

    def _attr_stmts(self, call: ast.Call) -> list:
        """The (node, key, value) of each AttrStmt a ``T.attr`` makes: one, or with TVM 0.27's
        ``T.attr({"device_id": 0, "device_type": 0})`` one per key, nested in that order."""
        if len(call.args) == 1 and isinstance(call.args[0], ast.Dict) and len(call.args[0].keys) > 1 and not call.keywords:
            d = call.args[0]
            return [self._attr_stmt_args(ast.Call(call.func, [ast.Dict([k], [v], d.line, d.col, d.end_line, d.end_col)],
                                                  [], call.line, call.col, call.end_line, call.end_col))
                    for k, v in zip(d.keys, d.values)]
        return [self._attr_stmt_args(call)]

    def _attr_stmt_args(self, call: ast.Call):
        """``T.attr(node, "key", value)`` or TVM 0.27's ``T.attr({"key": value})`` (node 0):
        the (node, key, value) of an AttrStmt. ``node`` is a buffer or an expression."""
        if call.keywords:
            raise self.error("T.attr() takes no keyword arguments", call.keywords[0])
        if len(call.args) == 1 and isinstance(call.args[0], ast.Dict) and len(call.args[0].keys) == 1:
            node, key_node, value_node = tir.IntImm("int32", 0), call.args[0].keys[0], call.args[0].values[0]
        elif len(call.args) == 3:
            target, key_node, value_node = call.args
            found = self.scope.lookup(target.id) if isinstance(target, ast.Name) else None
            if isinstance(target, ast.Call) and dotted_name(target.func) == "T.comm_reducer":
                node = self._comm_reducer(target)
            else:
                node = found if isinstance(found, tir.Buffer) else self.expr(target)
        else:
            raise self.error('T.attr takes (node, "key", value) or ({"key": value})', call)
        if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
            raise self.error("T.attr: the attribute key must be a string", key_node)
        if isinstance(value_node, ast.Constant) and isinstance(value_node.value, str):
            value = tir.StringImm("handle", value_node.value)
        else:
            value = self.expr(value_node)
        return node, key_node.value, value

    def _attr_dict(self, node) -> dict:
        if not isinstance(node, ast.Dict):
            raise self.error("expected a dict of attributes", node)
        out = {}
        for k, val in zip(node.keys, node.values):
            key = literal(self.ctx, k)
            if isinstance(key, (list, dict)):
                raise self.error("an attribute name must be a string", k)
            out[key] = self._attr_value(val)
        return out

    def _attr_value(self, node):
        """Attribute values stay Python literals unless written with a TIR type (T.bool(True))
        or as a compilation target (``T.target("cuda")``)."""
        if isinstance(node, ast.Call):
            if dotted_name(node.func) == "T.target":
                return self._target(node)
            return self.expr(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._attr_value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return self._attr_dict(node)
        if isinstance(node, ast.Name) and isinstance(self.scope.lookup(node.id), tir.Buffer):
            return self.scope.lookup(node.id)  # ``{"layout_free_placeholders": [B]}``
        return literal(self.ctx, node)

    def _target(self, call: ast.Call):
        """``T.target("cuda", host="llvm")`` or ``T.target({"kind": "cuda", ...})`` in an
        attribute (a function's ``"target"``): a `tvms.target.Target`, checked as one, so that
        an unknown kind or attribute is a located error rather than text kept blindly."""
        from ..target import Target

        args = bind_arguments(self.ctx, call, "T.target", ["target", "host"], {"host": None})

        def nested(node):  # a host written as T.target(...) inside the config dict
            if isinstance(node, ast.Call) and dotted_name(node.func) == "T.target":
                return self._target(node)
            raise self.error("expected a literal value or T.target(...)", node)

        config = literal(self.ctx, args["target"], nested)
        host = literal(self.ctx, args["host"], nested) if args["host"] is not None else None
        try:
            return Target(config, host=host)
        except ValueError as err:
            raise self.error(str(err), call) from None

    def _comm_reducer(self, call: ast.Call) -> tir.CommReducer:
        """``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])``; for n values reduced
        together, the lambda takes n left then n right operands and returns an n-tuple. Each
        operand has the dtype of its identity element."""
        args = bind_arguments(self.ctx, call, "T.comm_reducer", ["combiner", "identity_element"])
        fn, ids_node = args["combiner"], args["identity_element"]
        if not isinstance(ids_node, (ast.List, ast.Tuple)) or not ids_node.elts:
            raise self.error("T.comm_reducer: the identity elements must be a list such as [T.float32(0)]", ids_node)
        ids = [self.expr(e) for e in ids_node.elts]
        if not isinstance(fn, ast.Lambda) or len(fn.params) != 2 * len(ids):
            raise self.error(f"T.comm_reducer: the combiner must be a lambda of {2 * len(ids)} parameters "
                             f"(x, y for each of the {len(ids)} reduced values)", fn)
        self.scope.push()
        try:
            params = [tir.Var(ids[i % len(ids)].dtype, p, self.ctx.span(fn)) for i, p in enumerate(fn.params)]
            for p in params:
                self.scope.define(p.name, p)
            body = fn.body.elts if isinstance(fn.body, ast.Tuple) else [fn.body]
            if len(body) != len(ids):
                raise self.error(f"T.comm_reducer: the combiner returns {len(body)} values, not {len(ids)}", fn.body)
            results = [self._coerce(self.expr(e), i.dtype, e) for e, i in zip(body, ids)]
        finally:
            self.scope.pop()
        return tir.CommReducer(params[:len(ids)], params[len(ids):], results, ids)

    # ------------------------------------------------------------------ thread launches
    def _thread_tag(self, node) -> str:
        tag = literal(self.ctx, node)
        if not isinstance(tag, str) or tag not in THREAD_TAGS:
            raise self.error(f"unknown thread tag {tag!r}: expected one of {', '.join(sorted(THREAD_TAGS))}",
                             node, did_you_mean(str(tag), sorted(THREAD_TAGS)))
        return tag

    def _launch_thread(self, call: ast.Call, name: str | None = None, target=None):
        """``T.launch_thread(thread, extent)``, ``thread`` a tag ("threadIdx.x": a new index
        variable, named ``name``) or a variable from ``T.env_thread``: the thread IterVar and
        the extent of the ``"thread_extent"`` AttrStmt TVM builds for it."""
        args = bind_arguments(self.ctx, call, "T.launch_thread", ["thread", "extent"])
        thread = args["thread"]
        if isinstance(thread, ast.Constant) and isinstance(thread.value, str):
            tag = self._thread_tag(thread)
            var = tir.Var("int32", name or tag.replace(".", "_"), self.ctx.span(target or thread))
        else:
            var = self.expr(thread)
            tag = self._env_threads.get(var)
            if tag is None:
                raise self.error("T.launch_thread takes a thread tag such as \"threadIdx.x\" or a "
                                 "variable from T.env_thread", thread)
        extent = self._extent(args["extent"])
        if extent.dtype != var.dtype:
            extent = self._coerce(extent, var.dtype, args["extent"])
        iv = tir.IterVar(var, tir.Range(tir.IntImm(var.dtype, 0), extent), "thread", tag)
        return iv, extent


def merge_attrs(old: dict, new: dict):
    """Annotations of one block given in several T.block_attr, merged as TVM merges them:
    a key may repeat with the same value, dict values merge key by key; any other change of
    a value is a conflict. Returns the merged dict, or the conflicting key."""
    out = dict(old)
    for key, value in new.items():
        if key not in out:
            out[key] = value
        elif isinstance(out[key], dict) and isinstance(value, dict):
            inner = merge_attrs(out[key], value)
            if isinstance(inner, str):
                return inner
            out[key] = inner
        elif not _same_attr(out[key], value):
            return key
    return out


def _same_attr(a, b) -> bool:
    """Whether two annotation values are the same (expressions structurally)."""
    from ..ir import structural_equal

    if isinstance(a, (tir.PrimExpr, tir.Buffer)) or isinstance(b, (tir.PrimExpr, tir.Buffer)):
        return a is b or (type(a) is type(b) and structural_equal(a, b))
    return type(a) is type(b) and a == b


def attr_chain(attrs: list, body) -> tir.AttrStmt:
    """Nested AttrStmts, the first outermost, around ``body``."""
    for node, key, value in reversed(attrs):
        body = tir.AttrStmt(node, key, value, body)
    return body
