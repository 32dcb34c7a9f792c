"""Values made up for the parameters `tvms run` is not given: small random inputs (reproducible
with ``--seed``), and zero-filled buffers for a prim_func's outputs. A shape or dtype no array can
have is the user's error, said in one line."""

from __future__ import annotations

from .reporting import Failure, fail
from .symbols import Symbols


def is_float_dtype(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def zeros(shape: tuple, dtype: str):
    import numpy as np

    return _new_array(shape, dtype, lambda np_dtype: np.zeros(shape, np_dtype))


def random_array(shape: tuple, dtype: str, rng):
    """Small random values: floats uniform in [-1, 1), ints in [0, 10), bools."""
    import numpy as np

    def fill(np_dtype):
        if dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if is_float_dtype(dtype):
            return rng.uniform(-1.0, 1.0, size=shape).astype(np_dtype)
        if dtype.startswith(("int", "uint")):
            return rng.integers(0, 10, size=shape).astype(np_dtype)
        raise fail(f"cannot make up random values of dtype {dtype}")

    return _new_array(shape, dtype, fill)


def random_value(sinfo, symbols: Symbols, rng, what: str, param: str):
    """A random value fitting ``sinfo`` (its symbols all bound)."""
    from .. import relax
    from ..printer import sinfo_text

    def cannot(why: str) -> Failure:
        return fail(f"{what}: cannot make up a random value for it ({why}); "
                    f"give it with --input {param}=FILE.npy or in --inputs/--params")

    if isinstance(sinfo, relax.TensorStructInfo):
        if not sinfo.dtype:
            raise cannot(f"{sinfo_text(sinfo)} has no dtype")
        if sinfo.shape is None:
            raise cannot(f"{sinfo_text(sinfo)} has no shape")
        shape = tuple(int(symbols.value(d)) for d in sinfo.shape)
        return random_array(shape, sinfo.dtype, rng)
    if isinstance(sinfo, relax.TupleStructInfo):
        return tuple(random_value(f, symbols, rng, f"{what}[{k}]", param) for k, f in enumerate(sinfo.fields))
    if isinstance(sinfo, relax.ShapeStructInfo):
        if sinfo.values is None:
            raise cannot(f"{sinfo_text(sinfo)} has no values")
        return tuple(int(symbols.value(d)) for d in sinfo.values)
    if isinstance(sinfo, relax.PrimStructInfo):
        if sinfo.value is not None:
            return symbols.value(sinfo.value)
        return random_array((), sinfo.dtype, rng).item()
    raise cannot(f"{sinfo_text(sinfo) if sinfo is not None else 'no annotation'}")


def _new_array(shape: tuple, dtype: str, fill):
    """``fill(np_dtype)`` for an array of ``shape`` and ``dtype``; a bad shape or dtype is the
    user's error."""
    from ..runtime.ndarray import _np_dtype

    try:
        np_dtype = _np_dtype(dtype)
    except TypeError as err:
        raise fail(str(err)) from None
    if any(d < 0 for d in shape):
        raise fail(f"cannot make up an array of shape {shape}: a dimension is negative (see --shape)")
    try:
        return fill(np_dtype)
    except (MemoryError, ValueError) as err:  # NumPy: "array is too big" beyond the address space
        raise fail(f"cannot make up an array of shape {shape} and dtype {dtype}: "
                   f"{'out of memory' if isinstance(err, MemoryError) else 'too big for memory'}") from None
