"""``Module.export_tvm``: trace each spec'd method with symbolic tensors into a Relax function.

For each method the exporter opens ``bb.function(method, attrs={"num_input": k})`` and a
dataflow block, makes the function's parameters — the spec'd inputs, then the effects' state
(``debug=True`` adds an IO effect), then the module's parameters named by their dotted path with
``.`` -> ``_`` — points every `Parameter` at its variable, calls the method (each ``nn.op`` it
runs emits one binding), and binds what it returns as the block's output ``gv``. ``k`` counts
the inputs and effect states: everything before the weights, which is what ``num_input`` tells
passes such as BindParams.

A symbolic dimension is one ``tir.Var`` per name within a method: ``"n"`` in an input spec and
``"n"`` in a parameter's shape are the same ``n``, so shapes that must agree are checked as the
ops are emitted. (TVM keeps the two apart; sharing them is what a user writing the same name
means.) Each method gets fresh variables, so the functions share nothing.
"""

from __future__ import annotations

from .... import relax, tir
from ....diagnostics import TVMScriptError
from . import core
from . import spec as _spec

__all__ = ["Exporter"]


class Exporter:
    """Builds the IRModule of a `ModuleSpec`; ``debug`` adds the IO effect to every method."""

    def __init__(self, debug: bool = False) -> None:
        from ....compiler.block_builder import BlockBuilder
        from .modules import IOEffect

        self.builder = BlockBuilder()
        self.io_effect = IOEffect() if debug else None

    def build(self, spec: _spec.ModuleSpec):
        """``(IRModule, [(dotted name, Parameter)])``."""
        module = spec.module
        params = list(module.named_parameters())
        effects = self._effects(module)
        originals = [(p, p._expr) for _, p in params]
        try:
            if effects:
                self._emit_effect_init(effects)
            for name, method_spec in zip(spec.method_names, spec.method_specs):
                self._emit_method(name, method_spec, params, effects)
        finally:
            for p, expr in originals:  # parameters go back to standing for themselves
                p._expr = expr
        mod = self.builder.get()
        _check(mod, spec)
        return mod, params

    def _effects(self, module) -> list:
        found = [("", self.io_effect)] if self.io_effect is not None else []
        return found + list(core._find(module, "", lambda x: isinstance(x, core.Effect)))

    def _emit_effect_init(self, effects: list) -> None:
        bb = self.builder
        with bb.function("_initialize_effect", params=[]):
            with bb.dataflow():
                states = []
                for prefix, effect in effects:
                    states.extend(effect.emit_init(prefix, bb))
                out = bb.emit_output(bb.emit(relax.Tuple(states)))
            bb.emit_func_output(out)

    def _emit_method(self, name: str, method_spec: _spec.MethodSpec, params: list, effects: list) -> None:
        bb = self.builder
        dims: dict = {}  # name -> tir.Var, this method's symbolic dimensions
        args = [_make_input(n, s, dims) for n, s in zip(method_spec.arg_names, method_spec.arg_specs)]
        inputs = [var for var, _ in args]
        effect_inputs = self._effect_inputs(effects)
        param_vars = [_param_var(n, p, dims) for n, p in params]
        n_states = sum(len(state) for state in effect_inputs)
        num_input = len(inputs) + {"plain": n_states, "packed": min(n_states, 1), "none": 0}[method_spec.effect_mode]
        with bb.function(name, attrs={"num_input": num_input}):
            with bb.dataflow():
                signature = list(inputs)
                if method_spec.effect_mode != "none":
                    signature += self._bind_effects(effects, effect_inputs, method_spec.effect_mode)
                signature += _bind_params(bb, params, param_vars, method_spec.param_mode)
                values = {n: _unpack_input(bb, var, value) for n, (var, value) in zip(method_spec.arg_names, args)}
                result = method_spec.method(**values)
                output = _unwrap(result, name)
                finals = [v for _, e in effects for v in e.finalize()]
                if finals and method_spec.effect_mode != "none":
                    output = relax.Tuple([output, relax.Tuple(finals)])
                gv = bb.emit_output(output)
            bb.emit_func_output(gv, params=signature)

    def _effect_inputs(self, effects: list) -> list:
        """Each effect's state variables for one function (``create`` then ``set_state``)."""
        per_effect = []
        for prefix, effect in effects:
            state = effect.create(prefix)
            effect.set_state(state)
            per_effect.append(state)
        return per_effect

    def _bind_effects(self, effects: list, per_effect: list, mode: str) -> list:
        flat = [v for state in per_effect for v in state]
        if mode == "plain" or not flat:
            return flat
        packed = relax.Var("packed_effects", relax.TupleStructInfo([relax.struct_info_of(v) for v in flat]))
        i = 0
        for state, (_, effect) in zip(per_effect, effects):
            unpacked = []
            for v in state:
                unpacked.append(self.builder.emit(relax.TupleGetItem(packed, i), v.name_hint))
                i += 1
            effect.set_state(unpacked)
        return [packed]


def _symbolic(dim, dims: dict):
    """The method's variable for a symbolic dimension: one per name (made on first use of a
    string name; a ``tir.Var`` given in a spec is used as it is and claims its name)."""
    if isinstance(dim, str):
        if dim not in dims:
            dims[dim] = tir.Var("int64", dim)
        return dims[dim]
    if isinstance(dim, tir.Var):
        return dims.setdefault(dim.name, dim)
    return dim


class _TupleInput:
    """A tuple argument: its container type (tuple or list) and its elements' inputs."""

    def __init__(self, container: type, elements: list) -> None:
        self.container = container
        self.elements = elements


def _make_input(name: str, arg_spec, dims: dict):
    """``(function parameter, what the method receives)`` for one spec'd argument."""
    if isinstance(arg_spec, _spec.Tensor):
        shape = [_symbolic(d if isinstance(d, str) else core.make_dim(d, "spec"), dims) for d in arg_spec.shape]
        tensor = core.Tensor.placeholder(shape, arg_spec.dtype, name)
        return tensor._expr, tensor
    if isinstance(arg_spec, _spec.Int):
        n = _symbolic(name, dims)
        return relax.Var(name, relax.ShapeStructInfo([n])), n
    if isinstance(arg_spec, _spec.Tuple):
        elements = [_make_input(f"{name}_{i}", s, dims) for i, s in enumerate(arg_spec.elements)]
        sinfo = relax.TupleStructInfo([relax.struct_info_of(var) for var, _ in elements])
        return relax.Var(name, sinfo), _TupleInput(type(arg_spec.elements), elements)
    raise core.ExportError(f"unsupported spec for argument {name!r}: {arg_spec!r}")


def _unpack_input(bb, var, value):
    """What the method receives for an argument: a tuple's elements are taken out of the tuple
    parameter (``x_0 = x[0]``) inside the dataflow block."""
    if not isinstance(value, _TupleInput):
        return value
    out = []
    for i, (elem_var, elem_value) in enumerate(value.elements):
        item = bb.emit(relax.TupleGetItem(var, i), elem_var.name_hint)
        if isinstance(elem_value, core.Tensor):
            out.append(core.Tensor(_expr=item))
        elif isinstance(elem_value, _TupleInput):
            out.append(_unpack_input(bb, item, elem_value))
        else:  # an Int inside a tuple: the method gets the tir.Var, as for a top-level Int
            out.append(elem_value)
    return value.container(out)


def _param_var(name: str, param, dims: dict):
    """The function parameter of a Parameter: its dotted path with ``_``, and its shape with
    each symbolic variable replaced by the method's variable of that name (``in_channels //
    groups`` keeps its form)."""
    from tvmscript.ir.mutator import substitute
    from ....ir.tir_visitor import vars_in

    def dim(d):
        if not isinstance(d, tir.PrimExpr):
            return d
        return substitute(d, {v: _symbolic(v.name, dims) for v in vars_in([d])})

    return relax.Var(name.replace(".", "_"), relax.tensor_sinfo([dim(d) for d in param.shape], param.dtype))


def _bind_params(bb, params: list, param_vars: list, mode: str) -> list:
    """Point each Parameter at its variable; the function parameters they add."""
    if mode == "packed" and param_vars:
        packed = relax.Var("packed_params", relax.TupleStructInfo([v.struct_info for v in param_vars]))
        for i, ((_, p), v) in enumerate(zip(params, param_vars)):
            p._expr = bb.emit(relax.TupleGetItem(packed, i), v.name_hint)
        return [packed]
    for (_, p), v in zip(params, param_vars):
        p._expr = v
    return param_vars if mode == "plain" else []


def _unwrap(value, method: str):
    if isinstance(value, core.Tensor):
        return value._expr
    if isinstance(value, (tuple, list)):
        return relax.Tuple([_unwrap(v, method) for v in value])
    if isinstance(value, relax.Expr):
        return value
    raise core.ExportError(f"method {method!r} returned {type(value).__name__}: exported methods "
                           f"return nn.Tensor or (nested) tuples/lists of them")


def _check(mod, spec) -> None:
    from ....compiler.well_formed import check_well_formed

    try:
        check_well_formed(mod)
    except TVMScriptError as err:
        hint = ""
        if any(m.param_mode == "none" for m in spec.method_specs):
            hint = " (a method with param_mode 'none' cannot use the module's parameters)"
        raise core.ExportError(f"export_tvm built an ill-formed module: {err}{hint}") from None
