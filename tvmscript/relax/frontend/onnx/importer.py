"""`from_onnx`: an ONNX ``ModelProto`` into an IRModule whose ``main`` computes the graph.

The walk, in the order a reader would check it:

1. the model is validated (``onnx.checker``) and its opset read (`_model_opset`);
2. initializers become ``R.const``s — or, with ``keep_params_in_input=True``, parameters after
   the inputs, their arrays kept in the function's ``"params"`` attribute;
3. graph inputs become ``main``'s parameters: ``dim_param`` dims become ``tir.Var``s (one per
   name, shared between inputs), ``shape_dict`` overrides a shape;
4. each node is converted in graph order (`GraphImporter._convert`): a node whose inputs are
   all constants is evaluated now with ONNX's reference implementation (`_fold`); otherwise
   the converter registered for its op and version (registry.py, ops/) emits Relax;
5. the graph outputs are returned: one tensor, or a tuple of them.

Everything happens in one dataflow block, as TVM's importer writes it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

from .... import relax, tir
from ....ir import IRModule
from ..common import (FrontendError, OpUse, ProgressCallback, UnsupportedOpError, UnsupportedOpsError,
                      report_progress)
from . import ops  # noqa: F401  (registers the converters)
from .context import NodeContext, onnx_dtype
from .registry import NEWEST_OPSET, OLDEST_OPSET, find_converter
from .values import SymbolicInts, known_value

# Ops whose result is not a function of their inputs: never evaluated at import time.
_NOT_FOLDABLE = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                 "Bernoulli", "If", "Loop", "Scan"}


def from_onnx(model, shape_dict: Optional[dict] = None, dtype_dict="float32", opset: Optional[int] = None,
              keep_params_in_input: bool = False, sanitize_input_names: bool = True,
              progress: ProgressCallback = None) -> IRModule:
    """The IRModule of an ONNX model, as TVM's ``relax.frontend.onnx.from_onnx`` builds it.

    ``shape_dict`` maps input names to shapes (ints, or strings / ``tir.Var``s for symbolic
    dims) that replace the model's; ``dtype_dict`` maps input names to dtypes (a plain string
    leaves the model's dtypes, as TVM does); ``opset`` overrides the model's default-domain
    opset. With ``keep_params_in_input`` the initializers are parameters of ``main`` after the
    inputs (``R.func_attr({"num_input": k, "params": [arrays]})``) instead of constants.
    ``progress(done, total)`` is called as nodes are converted.

    Raises `UnsupportedOpError` for an op (or op version) without a translation, and
    `FrontendError` for an invalid model or one whose shapes cannot be followed.
    """
    _check_model(model, shape_dict or {})
    opset = _model_opset(model) if opset is None else int(opset)
    if opset < OLDEST_OPSET:
        raise FrontendError(
            f"the model uses ONNX opset {opset}; this importer translates opsets {OLDEST_OPSET} to "
            f"{NEWEST_OPSET}: convert it first (onnx.version_converter.convert_version(model, {OLDEST_OPSET}))")
    importer = GraphImporter(model.graph, opset, shape_dict or {}, dtype_dict, keep_params_in_input,
                             sanitize_input_names)
    return importer.run(progress)


def _check_model(model, shape_dict: dict) -> None:
    """A `FrontendError` unless `model` is a valid ModelProto whose inputs all have shapes
    (from the model or `shape_dict`, which `_check_shape_dict` checks first). ``onnx.checker``
    requires every graph input to have a shape: it checks the model with the shapes
    `shape_dict` gives filled in."""
    import onnx

    if not isinstance(model, onnx.ModelProto):
        raise FrontendError(f"from_onnx expects an onnx.ModelProto, not {type(model).__name__} "
                            "(load a file with onnx.load)")
    _check_shape_dict(model.graph, shape_dict)
    shapeless = [i for i in _graph_inputs(model.graph).values()
                 if i.type.HasField("tensor_type") and not i.type.tensor_type.HasField("shape")]
    for value_info in shapeless:
        if value_info.name not in shape_dict:
            raise _no_shape_error(value_info.name)
    if shapeless:
        model = _with_input_shapes(model, shapeless, shape_dict)
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, onnx.defs.SchemaError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FrontendError(f"invalid ONNX model: {first}") from None


def _check_shape_dict(graph, shape_dict: dict) -> None:
    """A `FrontendError` for a shape given for a name that is not one of the graph's inputs,
    or whose rank is not the one the model declares for that input. Either mistake would
    otherwise surface far from its cause: an unknown name is never read, and an image input
    given two dimensions fails in its first Conv ("not 0-D")."""
    inputs = _graph_inputs(graph)
    for name, shape in shape_dict.items():
        value_info = inputs.get(name)
        if value_info is None:
            listed = ", ".join(f"{n!r} {_shape_text(v)}" for n, v in inputs.items()) or "none"
            raise FrontendError(f"a shape was given for {name!r}, which is not an input of the model "
                                f"(its inputs: {listed})")
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
            raise FrontendError(f"the shape given for input {name!r} must be a list of dimensions, not {shape!r}")
        declared = _declared_dims(value_info)
        if declared is not None and len(shape) != len(declared):
            given = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
            raise FrontendError(f"the shape given for input {name!r}, {given}, is {len(shape)}-D, but input "
                                f"{name!r} is {len(declared)}-D {_shape_text(value_info)} in the model: "
                                f"give {len(declared)} dimensions")


def _graph_inputs(graph) -> dict:
    """{name: ValueInfoProto} of the graph's inputs, less the initializers older exporters
    list among them."""
    initializers = {init.name for init in graph.initializer}
    return {v.name: v for v in graph.input if v.name not in initializers}


def _declared_dims(value_info) -> Optional[list]:
    """The dims the model declares for an input (an int, a name, or None for an unnamed
    unknown size); None when it declares no shape."""
    tensor_type = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim]


def _shape_text(value_info) -> str:
    """``(batch, 3, 224, 224)``, as the model declares the input's shape (``?`` for an
    unnamed unknown size)."""
    dims = _declared_dims(value_info)
    if dims is None:
        return "(no shape)"
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _no_shape_error(name: str) -> FrontendError:
    return FrontendError(f"graph input {name!r} has no shape in the model: give it with shape_dict={{{name!r}: (...)}}")


def _with_input_shapes(model, shapeless: list, shape_dict: dict):
    """A copy of `model` whose `shapeless` inputs have the shapes of `shape_dict`."""
    import onnx

    names = {v.name for v in shapeless}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for value_info in out.graph.input:
        if value_info.name in names:
            shape = value_info.type.tensor_type.shape
            for d in shape_dict[value_info.name]:
                dim = shape.dim.add()
                if isinstance(d, (int, np.integer)):
                    dim.dim_value = int(d)
                else:
                    dim.dim_param = d.name if isinstance(d, tir.Var) else str(d)
    return out


def _model_opset(model) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise FrontendError("the model imports no version of the default ONNX domain (opset_import)")


def sanitize_name(name: str) -> str:
    """`name` as an identifier: characters other than letters, digits and ``_`` become ``_``,
    and a name not starting with a letter or ``_`` gets an ``input_`` prefix (as TVM)."""
    out = re.sub(r"\W", "_", name)
    if not out:
        return "input"
    if not (out[0].isalpha() or out[0] == "_"):
        out = "input_" + out
    return out


class GraphImporter:
    """The state of one import: the value of every ONNX name, the parameters, the builder."""

    def __init__(self, graph, opset: int, shape_dict: dict, dtype_dict, keep_params: bool,
                 sanitize: bool) -> None:
        self.graph = graph
        self.opset = opset
        self.shape_dict = shape_dict
        self.dtype_dict = dtype_dict if isinstance(dtype_dict, dict) else {}
        self.keep_params = keep_params
        self.sanitize = sanitize
        self.bb = relax.BlockBuilder()
        self.env: dict = {}                   # ONNX name -> Relax expr | SymbolicInts
        self.inputs: list = []                # main's input parameters
        self.params: list = []                # (Var, array) of initializers kept as parameters
        self._init_values: dict = {}          # ONNX name -> array, for initializers kept as parameters
        self._used_params: set = set()        # ids of the parameter Vars the function reads
        self._names: set = set()
        self._dims: dict = {}                 # dim_param -> tir.Var

    # ------------------------------------------------------------------ the walk
    def run(self, progress: ProgressCallback) -> IRModule:
        nodes = list(self.graph.node)
        self._check_supported(nodes)
        self._read_initializers()
        self._read_inputs()
        with self.bb.function("main"):
            with self.bb.dataflow():
                for index, node in enumerate(nodes):
                    self._convert(node, index)
                    report_progress(progress, index + 1, len(nodes))
                outputs = [self._graph_output(o.name) for o in self.graph.output]
                result = self.bb.emit_output(outputs[0] if len(outputs) == 1 else relax.Tuple(outputs))
            params = [var for var, _ in self.params if id(var) in self._used_params]
            self.bb.emit_func_output(result, params=self.inputs + params)
        return self._with_attrs(self.bb.get())

    def _with_attrs(self, mod: IRModule) -> IRModule:
        func = mod["main"]
        attrs = dict(func.attrs)
        attrs["num_input"] = len(self.inputs)
        kept = [array for var, array in self.params if id(var) in self._used_params]
        if kept:
            from ....runtime.ndarray import array as nd_array

            attrs["params"] = [nd_array(array) for array in kept]
        mod["main"] = dataclasses.replace(func, attrs=attrs)
        return mod

    def _graph_output(self, name: str):
        value = self.lookup(name)
        if isinstance(value, SymbolicInts):
            raise FrontendError(f"graph output {name!r} holds values computed from symbolic dimensions; "
                                "this importer cannot return them as a tensor")
        self.mark_used(value)
        return value

    # ------------------------------------------------------------------ names and values
    def _unique(self, name: str) -> str:
        base, n = name, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def lookup(self, name: str):
        try:
            return self.env[name]
        except KeyError:
            raise FrontendError(f"ONNX value {name!r} is used before any node produces it") from None

    def mark_used(self, value) -> None:
        if isinstance(value, relax.Var):
            self._used_params.add(id(value))

    def initializer_value(self, name: str) -> Optional[np.ndarray]:
        return self._init_values.get(name)

    # ------------------------------------------------------------------ parameters
    def _read_initializers(self) -> None:
        from onnx import numpy_helper

        for init in self.graph.initializer:
            array = numpy_helper.to_array(init)
            if not self.keep_params:
                self.env[init.name] = relax.const(array)
                continue
            name = self._unique(sanitize_name(init.name.removeprefix("onnx::")))
            var = relax.Var(name, relax.tensor_sinfo(list(array.shape), str(array.dtype)))
            self.env[init.name] = var
            self._init_values[init.name] = array
            self.params.append((var, array))

    def _read_inputs(self) -> None:
        for value_info in self.graph.input:
            if value_info.name in self.env:  # older exporters list initializers as inputs too
                continue
            name = value_info.name
            var_name = self._unique(sanitize_name(name) if self.sanitize else name)
            dtype = self._input_dtype(value_info)
            sinfo = relax.tensor_sinfo(self._input_shape(value_info), dtype)
            var = relax.Var(var_name, sinfo)
            self.env[name] = var
            self.inputs.append(var)

    def _input_dtype(self, value_info) -> str:
        if value_info.name in self.dtype_dict:
            return str(np.dtype(self.dtype_dict[value_info.name]))
        if not value_info.type.HasField("tensor_type"):
            raise FrontendError(f"graph input {value_info.name!r} is not a tensor; only tensor inputs are supported")
        return onnx_dtype(value_info.type.tensor_type.elem_type)

    def _input_shape(self, value_info) -> list:
        name = value_info.name
        if name in self.shape_dict:
            return [self._dim(d, name, k) for k, d in enumerate(self.shape_dict[name])]
        tensor_type = value_info.type.tensor_type
        if not tensor_type.HasField("shape"):
            raise _no_shape_error(name)
        dims = []
        for k, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                dims.append(int(dim.dim_value))
            elif dim.HasField("dim_param") and dim.dim_param:
                dims.append(self._dim(dim.dim_param, name, k))
            else:  # an anonymous unknown size: a symbolic dim of its own
                dims.append(self._dim(f"{sanitize_name(name)}_dim{k}", name, k))
        return dims

    def _dim(self, dim, input_name: str, axis: int):
        """A shape entry: an int, or the `tir.Var` of a symbolic dim (shared by name)."""
        if isinstance(dim, tir.Var):
            return dim
        if isinstance(dim, str):
            key = sanitize_name(dim)
            if key not in self._dims:
                self._dims[key] = tir.Var("int64", key)
            return self._dims[key]
        if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) and dim >= 0:
            return int(dim)
        raise FrontendError(f"shape of input {input_name!r}: dimension {axis} must be a non-negative int "
                            f"or a name, not {dim!r}")

    # ------------------------------------------------------------------ nodes
    def _check_supported(self, nodes: list) -> None:
        """Raise `UnsupportedOpsError` listing every node whose operator nothing translates,
        before any is converted, so that one try tells the user all that is missing.

        A node whose inputs may all be constants may be computed at import by ONNX's reference
        (`_fold`) instead of translated; it is left to the walk, which reports it alone if that
        fails too. Every other node without a converter is certainly missing one."""
        maybe_constant = {t.name for t in self.graph.initializer}
        missing: dict[str, list[OpUse]] = {}
        for index, node in enumerate(nodes):
            given = [name for name in node.input if name]
            foldable = (bool(given) and node.op_type not in _NOT_FOLDABLE
                        and all(name in maybe_constant for name in given))
            if node.domain not in ("", "ai.onnx"):
                op = f"{node.domain}.{node.op_type}"
            else:
                converter, why = (None, "") if foldable else find_converter(node.op_type, self.opset)
                op = None if foldable or converter is not None else node.op_type + (f" ({why})" if why else "")
            if op is not None:
                missing.setdefault(op, []).append(OpUse(node.name or f"#{index}"))
            elif foldable or node.op_type == "Constant":
                maybe_constant.update(name for name in node.output if name)
        if missing:
            raise UnsupportedOpsError("ONNX", missing)

    def _convert(self, node, index: int) -> None:
        ctx = NodeContext(self, node, index, self.opset)
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(f"{node.domain}.{node.op_type}", ctx.name, "ONNX")
        results = self._fold(ctx)
        if results is None:
            conv, why = find_converter(node.op_type, self.opset)
            if conv is None:
                raise UnsupportedOpError(node.op_type, ctx.name, "ONNX", why)
            try:
                results = conv.fn(ctx)
            except FrontendError:
                raise
            except (ValueError, TypeError) as err:  # an op's struct-info inference refused the call
                raise ctx.error(str(err)) from None
            except Exception as err:  # a converter's own failure: still say which node
                raise ctx.error(f"could not be converted ({type(err).__name__}: {err})") from err
        self._bind_outputs(ctx, results, last=index == len(self.graph.node) - 1)

    def _fold(self, ctx: NodeContext) -> Optional[list]:
        """The node's outputs computed now, when every input is a constant (ONNX's reference
        implementation evaluates it); None when the node must be translated."""
        node = ctx.node
        given = [name for name in node.input if name]
        if not given or node.op_type in _NOT_FOLDABLE:
            return None
        values = [self.lookup(name) for name in given]
        if not all(isinstance(v, relax.Constant) for v in values):
            return None
        from onnx.reference import ReferenceEvaluator

        try:
            evaluator = ReferenceEvaluator(node, opsets={"": self.opset})
            outputs = evaluator.run(None, {name: v.data for name, v in zip(given, values)})
        except Exception:  # the reference has no implementation: the converter decides
            return None
        return [np.asarray(o) for o in outputs]

    def _bind_outputs(self, ctx: NodeContext, results, last: bool) -> None:
        if not isinstance(results, (list, tuple)):
            results = [results]
        results = list(results)
        if len(results) == 1 and ctx.num_outputs > 1:
            sinfo = relax.struct_info_of(results[0]) if isinstance(results[0], relax.Expr) else None
            if isinstance(sinfo, relax.TupleStructInfo):
                results = [self.bb.emit(relax.TupleGetItem(results[0], i)) for i in range(len(sinfo.fields))]
        for i, name in enumerate(ctx.node.output):
            if not name:
                continue
            if i >= len(results) or results[i] is None:
                raise ctx.error(f"output {i} ({name!r}) is not supported by this importer")
            value = results[i]
            if last and isinstance(value, relax.Call) and [o.name for o in self.graph.output] == [name]:
                self.env[name] = value  # the function's result: bound by emit_output, as ``gv``
            else:
                self.env[name] = self._as_value(value)

    def _as_value(self, value):
        if isinstance(value, np.ndarray):
            return known_value(value, str(value.dtype)) if value.dtype != object else known_value(value, "int64")
        if isinstance(value, np.generic):
            return relax.const(np.asarray(value))
        if isinstance(value, relax.Call):
            return self.bb.emit(value)
        return value
