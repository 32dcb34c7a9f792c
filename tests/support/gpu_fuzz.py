"""Random well-typed Relax programs for differential testing of the GPU backend against the CPU
(tests/cuda/test_cuda_fuzz.py): elementwise chains, broadcasts, reductions, transposes and
casts over float32, float16 and int32, on static and symbolic shapes.

`random_program(rng, name)` draws one program from a NumPy generator (so a whole batch is one
seed, and a failure names the seed and the index to reproduce it): a Relax function of one or
two inputs and two to five ops, each op chosen among those the dtype and shape at hand allow.
`kernels(programs)` legalizes them into PrimFuncs with names unique across the batch, which
`cuda_emulator.compare_with_cpu` builds as one CUDA translation unit (one compilation for the
emulator) and runs against the CPU backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmscript import relax, tir

DTYPES = ("float32", "float32", "float16", "int32")   # float32 drawn twice as often
UNARY_FLOAT = ("exp", "abs", "negative", "sigmoid", "tanh", "sqrt_abs")
UNARY_INT = ("abs", "negative")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
SYMBOLIC = "n"


@dataclass
class FuzzProgram:
    """A generated program: its Relax module, and how it was drawn (for a failure's report)."""

    name: str
    mod: object
    ops: list
    dtype: str
    shape: tuple
    inputs: list          # (shape, dtype) of each parameter; `SYMBOLIC` for the symbolic dimension

    def __repr__(self) -> str:
        return f"<{self.name}: {self.dtype}{list(self.shape)}: {' -> '.join(self.ops)}>"


def _shape(rng) -> tuple:
    rank = int(rng.integers(1, 4))
    dims = [int(rng.choice([1, 3, 4, 7, 8, 16, 33])) for _ in range(rank)]
    if rng.random() < 0.3:                          # one symbolic dimension
        dims[int(rng.integers(rank))] = SYMBOLIC
    return tuple(dims)


def _struct(shape, dtype, n):
    return relax.TensorStructInfo([n if d == SYMBOLIC else d for d in shape], dtype)


def random_program(rng, name: str) -> FuzzProgram:
    """One program (see the module docstring)."""
    dtype = str(rng.choice(DTYPES))
    shape = _shape(rng)
    n = tir.Var(dtype="int64", name=SYMBOLIC)
    bb = relax.BlockBuilder()
    x = relax.Var("x", _struct(shape, dtype, n))
    params, ops, inputs = [x], [], [(shape, dtype)]
    with bb.function(name):
        with bb.dataflow():
            cur, cur_shape, cur_dtype = x, list(shape), dtype
            for _ in range(int(rng.integers(2, 6))):
                cur, cur_shape, cur_dtype, op = _step(bb, rng, cur, cur_shape, cur_dtype, n, params, inputs)
                ops.append(op)
            out = bb.emit_output(cur)
        bb.emit_func_output(out, params=params)
    return FuzzProgram(name, bb.get(), ops, dtype, shape, inputs)


def _step(bb, rng, cur, shape, dtype, n, params, inputs):
    """One op applied to ``cur`` (shape ``shape``, list of ints and `SYMBOLIC`): the new value,
    its shape and dtype, and the op's name."""
    floating = dtype.startswith("float")
    kinds = ["unary", "binary", "broadcast", "cast"]
    if len(shape) >= 2:
        kinds.append("transpose")
    if len(shape) >= 1:
        kinds.append("reduce")
    kind = str(rng.choice(kinds))
    if kind == "unary":
        op = str(rng.choice(UNARY_FLOAT if floating else UNARY_INT))
        if op == "sqrt_abs":
            return bb.emit(relax.op.sqrt(relax.op.abs(cur))), shape, dtype, op
        return bb.emit(getattr(relax.op, op)(cur)), shape, dtype, op
    if kind in ("binary", "broadcast"):
        op = str(rng.choice(BINARY))
        other_shape = list(shape)
        if kind == "broadcast":     # a trailing part of the shape, with some dims 1
            other_shape = [1 if rng.random() < 0.5 else d for d in shape[int(rng.integers(len(shape) + 1)):]] \
                or [1]
        y = relax.Var(f"y{len(params)}", _struct(tuple(other_shape), dtype, n))
        params.append(y)
        inputs.append((tuple(other_shape), dtype))
        return bb.emit(getattr(relax.op, op)(cur, y)), shape, dtype, f"{op}[{kind}]"
    if kind == "cast":
        to = str(rng.choice([d for d in ("float32", "float16", "int32") if d != dtype]))
        if not floating or to.startswith("float"):
            return bb.emit(relax.op.astype(cur, to)), shape, to, f"astype({to})"
        # float -> int: bounded first, so that the conversion is defined on both backends
        clipped = bb.emit(relax.op.clip(cur, -1000, 1000))
        return bb.emit(relax.op.astype(clipped, to)), shape, to, f"clip+astype({to})"
    if kind == "transpose":
        axes = [int(a) for a in rng.permutation(len(shape))]
        return bb.emit(relax.op.permute_dims(cur, axes)), [shape[a] for a in axes], dtype, f"permute{axes}"
    axis = int(rng.integers(len(shape)))
    keep = bool(rng.random() < 0.5)
    op = str(rng.choice(["sum", "max", "min", "mean"] if floating else ["sum", "max", "min"]))
    if dtype == "float16" and op in ("sum", "mean"):
        cur = bb.emit(relax.op.astype(cur, "float32"))   # fp16 sums: accumulated in fp32 on both sides
        dtype = "float32"
    new_shape = [1 if i == axis else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i != axis] or []
    value = bb.emit(getattr(relax.op, op)(cur, axis=[axis], keepdims=keep))
    return value, new_shape, dtype, f"{op}(axis={axis}, keepdims={keep})"


def kernels(programs: list) -> dict:
    """The PrimFuncs of ``programs``, legalized, each named ``<program>_<kernel>``: one batch."""
    out = {}
    for prog in programs:
        mod = relax.transform.LegalizeOps()(prog.mod)
        for gv, func in mod.functions.items():
            if isinstance(func, tir.PrimFunc):
                out[f"{prog.name}_{gv.name_hint}"] = func
    return out


def program_of(kernel_name: str, programs: list) -> FuzzProgram:
    return next(p for p in programs if kernel_name.startswith(p.name + "_"))


__all__ = ["FuzzProgram", "random_program", "kernels", "program_of"]
