"""Syntax tree to IR, the entry point (`build`) and the module level: an ``@I.ir_module`` class
becomes an `IRModule`, an ``@R.function`` a `relax.Function`, a ``@T.prim_func`` a
`tir.PrimFunc`, with the file's metadata section, its module-level TypeVars, the module's
attributes and global infos. The functions themselves are built by `tir_builder.py` and
`relax_builder.py`; what the two share is in `context.py` (scopes, errors), `arguments.py`
(callee names, arguments, literals) and `comments.py`.
"""

from __future__ import annotations

from typing import Any

from ..limits import MAX_NESTING
from .. import ir
from ..ir import relax, tir
from ..diagnostics import Span, TVMScriptError
from . import ast
from .arguments import bind_arguments, dotted_name, literal
from .comments import attach_comments, comments_of, is_printer_artifact, merge_comments
from .context import Context


# ----------------------------------------------------------------------------- entry point


def build(
    stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str,
    py_scope: dict[str, Any] | None = None, col_offset: int = 0,
):
    """Build the IR for a whole file: an IRModule, or a single function. ``py_scope`` holds the
    Python names around TVMScript written inside Python, ``col_offset`` the indentation removed
    from it (see tvmscript/script.py)."""
    where, depth = _deepest_statement(stmts)
    if depth > MAX_NESTING:
        raise Context(source, filename, []).error(
            f"expression nested too deeply: {depth} levels, at most {MAX_NESTING}", where,
            ["split it into several statements (a long sum into partial sums)"])
    try:
        return _build(stmts, comments, source, filename, py_scope, col_offset)
    except RecursionError:
        # Building recurses on the syntax tree; the limit above keeps it within its room.
        raise Context(source, filename, []).error("expression nested too deeply", where) from None


def _deepest_statement(stmts: list[ast.Stmt]) -> tuple:
    """(the statement holding the most deeply nested expression, its depth in syntax-tree
    levels), found without recursion."""
    best, best_depth = None, -1
    todo = [(s, 0, s) for s in stmts]
    while todo:
        node, depth, stmt = todo.pop()
        if isinstance(node, ast.Stmt):
            stmt = node
        if depth > best_depth:
            best, best_depth = stmt, depth
        todo.extend((c, depth + 1, stmt) for c in ast.children(node))
    return best, best_depth


def _build(stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str, py_scope=None, col_offset=0):
    from .relax_builder import RelaxFunctionBuilder
    from .tir_builder import PrimFuncBuilder

    comments = [c for c in comments if not is_printer_artifact(c.text)]
    ctx = Context(source, filename, comments)
    ctx.py_scope = py_scope
    ctx.col_offset = col_offset
    leftovers = attach_comments(stmts, comments, source)

    items = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "metadata":
            ctx.metadata = read_metadata(ctx, stmt.value)
            continue
        if isinstance(stmt, ast.Assign) and _is_type_var(stmt):
            name = stmt.target.id
            ctx.type_vars[name] = tir.Var("int64", name)
            continue
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
            items.append(stmt)
            continue
        if isinstance(stmt, ast.Pass):
            continue
        raise ctx.error(
            "expected an @I.ir_module class, an @R.function or a @T.prim_func at the top level", stmt
        )
    if not items:
        wanted = "expected an @I.ir_module class, an @R.function or a @T.prim_func"
        if not source.strip():
            raise TVMScriptError(f"the file is empty: {wanted}", Span(filename, 1, 1, 1, 1))
        if not stmts:
            first = comments[0] if comments else None
            line = first.line if first is not None else 1
            raise TVMScriptError(f"the file holds only comments: {wanted}", Span(filename, line, 1, line, 1))
        raise TVMScriptError(f"no @I.ir_module, @R.function or @T.prim_func found: {wanted}", Span(filename, 1, 1, 1, 1))
    if len(items) > 1:
        raise ctx.error("a file holds one module or one function; found another definition", items[1])
    item = items[0]
    if isinstance(item, ast.ClassDef):
        result = _build_module(ctx, item, PrimFuncBuilder, RelaxFunctionBuilder)
        _keep_leftovers(result.comments, result, leftovers)
        return result
    kind = function_kind(ctx, item)
    builder = PrimFuncBuilder if kind == "tir" else RelaxFunctionBuilder
    func = builder(ctx).build(item)
    _keep_leftovers(func.comments, func, leftovers)
    return func


def _keep_leftovers(table: dict, node, leftovers: list[ast.Comment]) -> None:
    """Comments after the last statement: at the left margin they end the file (the printer
    puts them last, unindented); indented, they close the module or function."""
    closing = [c.text for c in leftovers if c.col > 1]
    end = [c.text for c in leftovers if c.col == 1]
    if closing:
        merge_comments(table, node, ir.Comments(after=closing))
    if end:
        merge_comments(table, ("end", node), ir.Comments(after=end))


def read_metadata(ctx: Context, node) -> dict:
    """The file's metadata section, ``metadata = {"relax.expr.Constant": [R.const_data(shape,
    dtype, "base64..."), ...], "ffi.Tensor": [...]}`` (tvmscript/metadata.py), as {table name:
    [numpy arrays]}; the entries of the attribute tensors' table are `tvms.nd` tensors, made
    once here so that two references to one entry give the same tensor."""
    from ..metadata import TENSOR_ALIASES, TENSOR_KEY, decode

    if not isinstance(node, ast.Dict):
        raise ctx.error("the metadata section must be a dict of lists", node)
    tables = {}
    for key_node, value in zip(node.keys, node.values):
        key = literal(ctx, key_node)
        if not isinstance(key, str) or not isinstance(value, (ast.List, ast.Tuple)):
            raise ctx.error("the metadata section must map names to lists", key_node)
        entries = []
        for entry in value.elts:
            if not (isinstance(entry, ast.Call) and dotted_name(entry.func) == "R.const_data"):
                raise ctx.error("a metadata entry is R.const_data(shape, dtype, \"base64\")", entry)
            args = bind_arguments(ctx, entry, "R.const_data", ["shape", "dtype", "data"])
            shape, dtype, data = (literal(ctx, args[k]) for k in ("shape", "dtype", "data"))
            if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
                raise ctx.error("the shape of a metadata entry is a tuple of sizes", args["shape"])
            if not isinstance(dtype, str) or not isinstance(data, str):
                raise ctx.error("a metadata entry needs a dtype string and a base64 string", entry)
            try:
                entries.append(decode(tuple(shape), dtype, data))
            except (ValueError, TypeError) as err:
                raise ctx.error(f"bad metadata entry: {err}", args["data"]) from None
        if key in TENSOR_ALIASES:
            key = TENSOR_KEY
        if key == TENSOR_KEY:
            from ..runtime.ndarray import array as nd_array  # aligned, as the importers' own

            entries = [nd_array(a) for a in entries]
        tables[key] = entries
    return tables


def _is_type_var(stmt: ast.Assign) -> bool:
    v = stmt.value
    return (
        isinstance(stmt.target, ast.Name)
        and isinstance(v, ast.Call)
        and dotted_name(v.func) == "TypeVar"
    )

def function_kind(ctx: Context, fdef: ast.FunctionDef) -> str:
    for dec in fdef.decorators:
        name = dotted_name(dec.func if isinstance(dec, ast.Call) else dec)
        if name == "T.prim_func":
            return "tir"
        if name == "R.function":
            return "relax"
    if fdef.decorators:
        raise ctx.error("unknown decorator: expected @T.prim_func or @R.function", fdef.decorators[0])
    raise ctx.error(f"function '{fdef.name}' needs a @T.prim_func or @R.function decorator", fdef)


def _build_module(ctx: Context, cdef: ast.ClassDef, prim_builder, relax_builder) -> ir.IRModule:
    if not any(
        dotted_name(d.func if isinstance(d, ast.Call) else d) == "I.ir_module" for d in cdef.decorators
    ):
        raise ctx.error(f"class '{cdef.name}' needs the @I.ir_module decorator", cdef)
    mod = ir.IRModule()
    mod.name = cdef.name
    merge_comments(mod.comments, mod, comments_of(cdef))
    funcs = []
    externs = []
    for stmt in cdef.body:
        if isinstance(stmt, ast.FunctionDef):
            kind = function_kind(ctx, stmt)
            if stmt.name in ctx.module_names:
                first = next(f for _, _, f in funcs if f.name == stmt.name)
                raise ctx.error(
                    f"duplicate function name '{stmt.name}' in module", stmt,
                    [f"'{stmt.name}' is first defined on line {first.line}"],
                )
            gv = ir.GlobalVar(stmt.name)
            ctx.module_names[stmt.name] = gv
            ctx.module_kinds[stmt.name] = kind
            ctx.module_defs[stmt.name] = stmt
            funcs.append((gv, kind, stmt))
        elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "I.module_attrs":
            args = bind_arguments(ctx, stmt.value, "I.module_attrs", ["attrs"])
            mod.attrs.update(literal(ctx, args["attrs"]))
        elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "I.module_global_infos":
            mod.global_infos.update(_module_global_infos(ctx, stmt.value))
            ctx.global_infos = mod.global_infos
        elif isinstance(stmt, ast.Pass):
            continue
        elif _is_extern_func_def(stmt):
            # ``my_ext = R.ExternFunc("my_ext")``: a global naming an extern function, as TVM has.
            from .relax_calls import extern_func

            gv = ir.GlobalVar(stmt.target.id)
            ctx.module_names[gv.name_hint] = gv
            ctx.module_kinds[gv.name_hint] = "extern"
            externs.append((gv, extern_func(relax_builder(ctx), stmt.value, "R.ExternFunc")))
        else:
            raise ctx.error("expected a function definition inside the module class", stmt)
    ctx.class_name = cdef.name
    ctx.relax_signatures = {name: ret for _, kind, stmt in funcs if kind != "tir"
                            for name, ret in [(stmt.name, _declared_return(ctx, relax_builder, stmt))]
                            if ret is not None}
    # Prim funcs first, so Relax functions can see their signatures; a Relax function after the
    # Relax functions it calls, so a call has its callee's inferred return wherever it is written.
    for gv, kind, stmt in _build_order(funcs):
        builder = prim_builder if kind == "tir" else relax_builder
        func = builder(ctx).build(stmt)
        mod[gv] = func
        if kind == "tir":
            ctx.prim_funcs[stmt.name] = func  # what the Relax functions' call_tirs are checked against
        if kind != "tir" and func.ret_struct_info is not None and not relax.sinfo_symbols(func.ret_struct_info):
            ctx.relax_signatures[stmt.name] = func.ret_struct_info
    # Keep the source order of functions (the printer sorts them canonically).
    ordered = ir.IRModule()
    for gv, value in externs:
        ordered[gv] = value
    for gv, _, _ in funcs:
        ordered[gv] = mod[gv]
    mod.functions = ordered.functions
    mod._by_name = ordered._by_name
    return mod


def _is_extern_func_def(stmt) -> bool:
    return (isinstance(stmt, ast.Assign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.value, ast.Call)
            and dotted_name(stmt.value.func) == "R.ExternFunc")


def _build_order(funcs: list) -> list:
    """``funcs`` (GlobalVar, kind, def) in the order to build them: the prim_funcs, then each Relax
    function after the module's Relax functions it refers to (source order among the rest, and
    for functions that call each other)."""
    relax_defs = {stmt.name: (gv, kind, stmt) for gv, kind, stmt in funcs if kind != "tir"}
    order = [f for f in funcs if f[1] == "tir"]
    placed: set = set()
    visiting: set = set()

    def place(name: str) -> None:
        if name in placed or name in visiting:
            return
        visiting.add(name)
        for callee in _names_used(relax_defs[name][2]):
            if callee in relax_defs and callee != name:
                place(callee)
        visiting.discard(name)
        placed.add(name)
        order.append(relax_defs[name])

    for name in relax_defs:
        place(name)
    return order


def _names_used(node) -> set:
    """The names and attribute names a definition mentions (``cls.f``, ``Module.f``, ``f``)."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _declared_return(ctx: Context, relax_builder, fdef: ast.FunctionDef):
    """What a call of a Relax function defined later in the module returns, as TVM's parser
    sees it: the function's return annotation when it has one written with constant shapes
    (one with the callee's own symbolic dims means nothing at the caller), else unknown."""
    if fdef.returns is None:
        return None
    try:
        ret = relax_builder(ctx).sinfo(fdef.returns)
    except TVMScriptError:
        return None  # reported where the function itself is built
    return None if relax.sinfo_symbols(ret) else ret


def _module_global_infos(ctx: Context, call: ast.Call) -> dict:
    """``I.module_global_infos({"vdevice": [I.vdevice("llvm"), ...]})``: a dict of lists of global
    infos (``I.vdevice(target, vdevice_id=0, memory_scope="global")``, ``I.dummy_global_info()``),
    kept as plain data on the module (ir.VDevice, ir.DummyGlobalInfo)."""
    name = "I.module_global_infos"
    args = bind_arguments(ctx, call, name, ["global_infos"])

    def info(node):
        callee = dotted_name(node.func) if isinstance(node, ast.Call) else None
        if callee == "I.vdevice":
            a = bind_arguments(ctx, node, callee, ["target", "vdevice_id", "memory_scope"],
                               {"vdevice_id": None, "memory_scope": None})
            target = literal(ctx, a["target"])
            vid = 0 if a["vdevice_id"] is None else literal(ctx, a["vdevice_id"])
            scope = "global" if a["memory_scope"] is None else literal(ctx, a["memory_scope"])
            if not isinstance(target, (str, dict)):
                raise ctx.error("I.vdevice's target must be a target string or a dict of its attributes", a["target"])
            if not isinstance(vid, int) or not isinstance(scope, str):
                raise ctx.error("I.vdevice takes (target, vdevice_id: int, memory_scope: str)", node)
            return ir.VDevice(target, vid, scope)
        if callee == "I.dummy_global_info":
            bind_arguments(ctx, node, callee, [])
            return ir.DummyGlobalInfo()
        raise ctx.error(f"{name}: expected I.vdevice(...) or I.dummy_global_info() here", node)

    value = literal(ctx, args["global_infos"], info)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (list, tuple)) for k, v in value.items()):
        raise ctx.error(f'{name} takes a dict of lists: {{"vdevice": [I.vdevice("llvm")]}}', args["global_infos"])
    return {k: list(v) for k, v in value.items()}
