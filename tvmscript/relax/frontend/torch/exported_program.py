"""``from_exported_program``: a ``torch.export.ExportedProgram`` into a Relax IRModule.

An ExportedProgram is an FX graph of ATen operators (``aten.conv2d.default``,
``aten.linear.default``, ...) whose placeholders are, in order, the model's parameters,
buffers and constants, then the user's inputs; its graph signature says which is which. Sizes
that ``torch.export.Dim`` made symbolic are ``SymInt``s whose sympy symbols (``s27``) become
``tir.Var``s named as the user's Dim (``Dim("seq")`` gives ``R.Tensor((1, "seq"), ...)``;
inputs sharing a Dim share the var), or as torch's symbol where the name is lost (a program
read back by ``torch.export.load``); their ranges go to the function's
``tir_var_lower_bound``/``tir_var_upper_bound`` attributes, as TVM writes them, and the VM
checks them when the function is called.

The graph is read as exported, without ``ExportedProgram.run_decompositions()`` (TVM 0.27's
``run_ep_decomposition=True`` default): the high-level ATen ops map onto Relax's high-level
ops (``linear``, ``conv2d``, ``batch_norm``, ``scaled_dot_product_attention``), which keeps
the printed module as the TVM tutorials show it and the import fast. Pass
``run_ep_decomposition=True`` to import the core-ATen form instead. A graph that writes into a
tensor through a view (swin's ``attn_mask[h0:h1, w0:w1] = count``) is functionalized by torch
first (``run_decompositions({})``, which decomposes nothing), so the writes become
``slice_scatter``s.
"""

from __future__ import annotations

from .... import relax, tir
from ....ir.op import api as _op
from ..common import FrontendError, ProgressCallback
from .base import BaseTranslator, common_converters
from .graph import attach_params, convert_dtype, emit_outputs, tensor_to_numpy


class ExportedProgramImporter(BaseTranslator):
    """Converts one ExportedProgram; see `from_exported_program`."""

    def __init__(self) -> None:
        super().__init__()
        self.sym_vars: dict[str, tir.Var] = {}  # torch's symbol ("s27") -> its tir.Var
        self.dim_names: dict[str, str] = {}  # torch's symbol -> the user's torch.export.Dim name
        common = common_converters(self)
        self.by_packet = common
        self.by_overload = {
            # Overloads that mean something else than their packet's other overloads.
            "max.dim": self._max_dim, "min.dim": self._min_dim,
            "max.default": self.reduce(_op.max), "min.default": self.reduce(_op.min),
            "max.other": common["maximum"], "min.other": common["minimum"],
            "split.Tensor": self._split, "sym_size.int": self._sym_size,
        }
        for name in ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
                     "sym_constrain_range", "_assert_async"):
            self.by_packet[name] = self._assert_noop

    # ------------------------------------------------------------------ ops
    def converter_for(self, node):
        target = node.target
        name = getattr(target, "__name__", None)
        if name is None:
            return None
        if name in self.by_overload:
            return self.by_overload[name]
        packet = name.split(".")[0]
        if packet.endswith("_") and not packet.startswith("_") and packet[:-1] in self.by_packet:
            return self._in_place(self.by_packet[packet[:-1]])
        return self.by_packet.get(packet)

    def op_name(self, node) -> str:
        target = node.target
        module = getattr(target, "namespace", None)
        name = getattr(target, "__name__", str(target))
        return f"{module}.{name}" if module else name

    def _in_place(self, convert):
        """``relu_``/``add_``: the out-of-place op, and later uses of the mutated input see
        the new value (as they would in PyTorch)."""
        from torch import fx

        def run(node):
            result = convert(node)
            target = node.args[0] if node.args else None
            if isinstance(target, fx.Node):
                self.env[target] = result
            return result

        return run

    def _max_dim(self, node):
        return self._reduce_with_index(node, _op.max, _op.argmax)

    def _min_dim(self, node):
        return self._reduce_with_index(node, _op.min, _op.argmin)

    def _reduce_with_index(self, node, reduce_fn, arg_fn):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        keepdim = bool(self.arg(node, 2, "keepdim", False))
        values = self.emit(reduce_fn(x, axis=[dim], keepdims=keepdim))
        indices = self.emit(arg_fn(x, axis=dim, keepdims=keepdim))
        return (values, indices)

    # ------------------------------------------------------------------ symbolic sizes
    def dim_of(self, size):
        """A torch size (int or SymInt) as a Relax dim: an int, or a tir expression over the
        symbols' `tir.Var`s."""
        import torch

        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr.is_number:
                return int(expr)
            return self.sympy_to_tir(expr)
        raise FrontendError(f"unexpected size {size!r}")

    def sym_var(self, symbol: str) -> tir.Var:
        """The tir.Var of torch's size symbol ``symbol``, named as the user's Dim where known."""
        var = self.sym_vars.get(symbol)
        if var is None:
            name = self.dim_names.get(symbol, symbol)
            if any(v.name == name for v in self.sym_vars.values()):
                name = symbol  # two of the program's symbols claim one Dim: keep them apart
            var = self.sym_vars[symbol] = tir.Var("int64", name)
        return var

    def sympy_to_tir(self, expr):
        """A sympy expression over torch's size symbols as a tir expression."""
        import sympy

        if isinstance(expr, sympy.Symbol):
            return self.sym_var(str(expr))
        if isinstance(expr, sympy.Integer):
            return tir.IntImm("int64", int(expr))
        if isinstance(expr, (sympy.Add, sympy.Mul)):
            terms = [self.sympy_to_tir(a) for a in expr.args]
            # Constants after the symbols: s0 + 1, 2 * s0 reads as torch prints it.
            terms.sort(key=lambda t: isinstance(t, tir.IntImm))
            out = terms[0]
            for t in terms[1:]:
                out = out + t if isinstance(expr, sympy.Add) else out * t
            return out
        kind = type(expr).__name__
        if kind == "FloorDiv":
            return self.sympy_to_tir(expr.args[0]) // self.sympy_to_tir(expr.args[1])
        if kind in ("Mod", "PythonMod"):
            return self.sympy_to_tir(expr.args[0]) % self.sympy_to_tir(expr.args[1])
        if kind in ("Max", "Min"):
            cls = tir.Max if kind == "Max" else tir.Min
            args = [tir.as_expr(self.sympy_to_tir(a), "int64") for a in expr.args]
            out = args[0]
            for a in args[1:]:
                out = cls("int64", out, a)
            return out
        raise FrontendError(f"the symbolic size {expr} ({kind}) has no tir equivalent here")

    def node_dim(self, node, dim: int):
        val = node.meta.get("val")
        shape = getattr(val, "shape", None)
        if shape is None or dim >= len(shape):
            return None
        return self.dim_of(shape[dim])

    def tensor_sinfo(self, value, what: str) -> relax.TensorStructInfo:
        shape = getattr(value, "shape", None)
        if shape is None:
            raise FrontendError(f"{what} has no tensor shape in the exported graph")
        return relax.TensorStructInfo([self.dim_of(s) for s in shape], convert_dtype(value.dtype))

    def range_attrs(self, ep) -> dict:
        """``tir_var_lower_bound``/``tir_var_upper_bound`` for the symbols of the signature."""
        import math

        lower, upper = {}, {}
        for symbol, vr in getattr(ep, "range_constraints", {}).items():
            var = self.sym_vars.get(str(symbol))
            if var is None:
                continue
            try:
                lower[var.name] = int(vr.lower)
                if not math.isinf(float(vr.upper)):
                    upper[var.name] = int(vr.upper)
            except (TypeError, ValueError, OverflowError):
                continue
        attrs = {}
        if lower:
            attrs["tir_var_lower_bound"] = lower
        if upper:
            attrs["tir_var_upper_bound"] = upper
        return attrs

    # ------------------------------------------------------------------ the program
    def import_program(self, ep, keep_params_as_input: bool, unwrap_unit_return_tuple: bool,
                       no_bind_return_tuple: bool, progress: ProgressCallback):
        from torch.export.graph_signature import InputKind, OutputKind

        graph = ep.graph_module.graph
        nodes = list(graph.nodes)
        placeholders = {n.name: n for n in nodes if n.op == "placeholder"}
        self.check_supported(nodes)
        self.dim_names = _dim_names(placeholders.values())

        inputs, params, arrays = [], [], []
        for spec in ep.graph_signature.input_specs:
            node = placeholders[spec.arg.name]
            if spec.kind == InputKind.USER_INPUT:
                val = node.meta.get("val")
                if not hasattr(val, "shape"):
                    raise FrontendError(f"input {node.name!r} is not a tensor; only tensor inputs are supported")
                var = relax.Var(node.name, self.tensor_sinfo(val, f"input {node.name!r}"))
                inputs.append(var)
                self.env[node] = var
                continue
            if spec.kind == InputKind.BUFFER and not node.users:
                continue  # BatchNorm's num_batches_tracked: only training reads it
            tensor = _lookup_tensor(ep, spec)
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and keep_params_as_input:
                var = relax.Var(node.name, self.tensor_sinfo(tensor, f"{spec.kind.name.lower()} {node.name!r}"))
                params.append(var)
                arrays.append(tensor_to_numpy(tensor))
                self.env[node] = var
            else:
                self.env[node] = _op.const(tensor_to_numpy(tensor))

        attrs = {"num_input": len(inputs)} if keep_params_as_input else {}
        attrs.update(self.range_attrs(ep))
        with self.bb.function("main", params=inputs + params, attrs=attrs or None):
            with self.bb.dataflow():
                results = self.convert_nodes(nodes, progress)
                results = list(results) if isinstance(results, (list, tuple)) else [results]
                specs = ep.graph_signature.output_specs
                if len(specs) == len(results):
                    user = [r for r, s in zip(results, specs) if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
                    results = user or results
                output = emit_outputs(self.bb, results, unwrap_unit_return_tuple, no_bind_return_tuple)
            self.bb.emit_func_output(output)
        mod = self.bb.get()
        if keep_params_as_input:
            attach_params(mod, arrays)
        return mod


def writes_through_a_view(graph) -> bool:
    """Whether an in-place op of the graph writes into a tensor that another node aliases: a
    view of it (``mask[:4, 2:].fill_(1)`` writes into ``mask`` through a slice) or a tensor
    other views read. Converting node by node, an in-place op only replaces its own input's
    value (`ExportedProgramImporter._in_place`); such a graph is functionalized by torch first."""
    from torch import fx

    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        for spec, arg in zip(schema.arguments, node.args):
            written = spec.alias_info is not None and spec.alias_info.is_write
            if written and isinstance(arg, fx.Node) and (
                    _is_view(arg) or any(_is_view(user) for user in arg.users if user is not node)):
                return True
    return False


def _functionalized(ep):
    """torch's functionalization of ``ep``, decomposing nothing: the writes through views
    become ``slice_scatter``, ``select_scatter``, ``copy``. (torch 2.13 warns here about its own
    use of a deprecated pytree API.)"""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return ep.run_decompositions({})


def _is_view(node) -> bool:
    """Whether an FX node's ATen op returns a view of an input (slice, select, view, ...)."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write
                                      for r in schema.returns)


def _dim_names(placeholders) -> dict:
    """``{torch's symbol: the user's Dim name}`` (``{"s27": "seq"}``) for the symbolic sizes of
    the program's inputs. torch.export keeps the names in the ShapeEnv behind the inputs'
    sizes: each symbol's sources (``L['x'].size()[1]``) map to the name of the Dim given for
    them. A program read back by ``torch.export.load`` has lost them, so its sizes keep
    torch's symbols. Symbols torch unified with another (``x`` and ``y`` given one Dim) are
    listed too: only those the graph still uses become vars."""
    shape_env = _shape_env(placeholders)
    if shape_env is None:
        return {}
    debug_names = getattr(shape_env, "source_name_to_debug_name", {}) or {}
    names: dict = {}
    for symbol, sources in getattr(shape_env, "var_to_sources", {}).items():
        for source in sources:
            source_name = source.name() if callable(source.name) else source.name
            name = debug_names.get(source_name)
            if name and name.isidentifier():
                names[str(symbol)] = name
                break
    return names


def _shape_env(placeholders):
    """The ShapeEnv of the first symbolic size among the placeholders' values (None if none)."""
    import torch

    for node in placeholders:
        for size in getattr(node.meta.get("val"), "shape", ()):
            if isinstance(size, torch.SymInt):
                return getattr(size.node, "shape_env", None)
    return None


def _lookup_tensor(ep, spec):
    """The tensor behind a parameter, buffer or constant placeholder."""
    target = spec.target
    if target in ep.state_dict:
        return ep.state_dict[target]
    if target in ep.constants:
        return ep.constants[target]
    raise FrontendError(f"the exported program has no tensor {target!r} for input {spec.arg.name!r}")


def from_exported_program(exported_program, keep_params_as_input: bool = False,
                          unwrap_unit_return_tuple: bool = False, no_bind_return_tuple: bool = False,
                          progress: ProgressCallback = None, *, run_ep_decomposition: bool = False):
    """Import a ``torch.export.ExportedProgram`` as an IRModule whose ``main`` computes it.

    - ``keep_params_as_input``: the parameters, then the buffers the graph reads (BatchNorm's
      running statistics), become ``main``'s parameters after the inputs, with
      ``R.func_attr({"num_input": k})``, and their arrays (``tvms.nd.array``) are kept in the
      ``"params"`` attribute (``relax.frontend.detach_params`` takes them off), so a caller
      (``tvms run --params``) can replace any of them; otherwise they are bound as constants.
      Tensor constants the program lifted (``torch.tensor(...)`` in ``forward``) are always
      constants. (TVM's importer binds buffers as constants either way.)
    - ``unwrap_unit_return_tuple``: a model returning one tensor returns it, not a 1-tuple.
    - ``no_bind_return_tuple``: each returned tensor gets its own ``gv``.
    - ``progress(done, total)`` is called as the graph's nodes are converted.

    Raises `UnsupportedOpsError` listing every ATen operator with no translation (with the
    nodes using them and the user's source lines) before converting anything,
    `UnsupportedOpError` for an argument a converter cannot translate, `FrontendError` for
    anything else the importer cannot follow."""
    importer = ExportedProgramImporter()
    if run_ep_decomposition:
        exported_program = exported_program.run_decompositions()
    elif writes_through_a_view(exported_program.graph):
        importer.check_supported(exported_program.graph.nodes)  # before torch's work, not after
        exported_program = _functionalized(exported_program)
    return importer.import_program(
        exported_program, keep_params_as_input, unwrap_unit_return_tuple, no_bind_return_tuple, progress)
