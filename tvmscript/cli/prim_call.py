"""`tvms run` of a lone prim_func, called destination-passing: the buffers it writes are its
outputs, zero-filled unless given; the others are its inputs, random unless given; its scalar
parameters come from ``--shape`` or an input."""

from __future__ import annotations

from .calls import CallOptions, CallResult, announce_random, on_device, timed
from .inputs import read_given
from .program import Program
from .symbols import Symbols, missing_symbols_error, tir_names
from .synthesis import is_float_dtype, random_array, zeros


def call_prim(program: Program, name: str, func, options: CallOptions) -> CallResult:
    """A prim_func, called destination-passing: every buffer not given is made up, zero-filled
    when the kernel writes it (an output), random when it only reads it; the buffers it
    writes are the outputs."""
    import time

    import numpy as np

    from .. import ir

    params = [v.name for v in func.params]
    buffers = {v.name: func.buffer_map.get(v) for v in func.params}
    aliases = {b.name: v for v, b in buffers.items() if b is not None and b.name not in buffers}
    scalars = [v for v in func.params if buffers[v.name] is None]
    known = []
    for b in buffers.values():
        if b is not None:
            for d in b.shape:
                tir_names(d, known)
    for v in scalars:
        if v.name not in known:
            known.append(v.name)
    floats = {v.name for v in scalars if is_float_dtype(v.dtype)}
    symbols = Symbols(options.shapes, known, name, floats, scalars=bool(scalars))
    given = read_given(options.given, params, name, aliases)

    t0 = time.perf_counter()
    ex = program.compile(ir.IRModule({name: func}), options.target, options.bounds_check)
    compile_s = time.perf_counter() - t0
    kernel = ex.kernels[name] if name in ex.kernels else next(iter(ex.kernels.values()))
    written = {p.name for p in kernel.params if p.kind == "buffer" and p.written}

    _bind_given(func, buffers, given, symbols)
    missing = _missing_symbols(func, buffers, given, symbols)
    if missing:
        raise missing_symbols_error(missing, name)
    values, random_names, zeroed = _values(func, buffers, given, symbols, written, options.seed)
    announce_random(random_names, zeroed, options.seed)

    out_index = [i for i, v in enumerate(func.params) if v.name in written] or \
        [i for i, v in enumerate(func.params) if buffers[v.name] is not None]
    pristine = {i: np.array(values[i], copy=True) for i in out_index if isinstance(values[i], np.ndarray)}
    runs = [0]

    dev, dev_values = on_device(values, options.target)
    if dev is not None:
        kernel = ex[name]  # the kernel loaded on the GPU

    def call():
        if runs[0]:  # every run starts from the same buffers, so in-place kernels repeat
            for i, saved in pristine.items():
                if dev is None:
                    np.copyto(values[i], saved)
                else:
                    dev_values[i].copyfrom(saved)
        runs[0] += 1
        kernel(*dev_values)
        if dev is not None:
            dev.sync()

    sources = {p: g.source for p, g in given.items()}
    _, first, times = timed(program, call, options.repeat, sources)
    outputs = [(params[i], np.asarray(values[i]) if dev is None else dev_values[i].numpy()) for i in out_index]
    return CallResult(outputs, compile_s, first, times)


def _bind_given(func, buffers: dict, given: dict, symbols: Symbols) -> None:
    """Bind the symbols the given buffers' shapes and whole-number scalars fix."""
    for v in func.params:
        g = given.get(v.name)
        b = buffers[v.name]
        if g is None:
            continue
        if b is not None and hasattr(g.value, "shape"):
            symbols.bind(b.shape, tuple(g.value.shape), f"input '{v.name}' (from {g.source})")
        elif b is None and getattr(g.value, "ndim", None) == 0 and not is_float_dtype(v.dtype):
            symbols.bind([v], (g.value.item(),), f"input '{v.name}' (from {g.source})")


def _missing_symbols(func, buffers: dict, given: dict, symbols: Symbols) -> dict:
    """What `missing_symbols_error` takes: the scalars and dimensions of parameters not given
    that nothing binds."""
    missing: dict = {}
    for v in func.params:
        b = buffers[v.name]
        if v.name in given:
            continue
        if b is None:
            if v.name not in symbols.env:
                missing.setdefault(v.name, []).append((v.name, f"(a {v.dtype} scalar parameter)", False))
            continue
        for sym in [n for d in b.shape for n in tir_names(d, [])]:
            if sym not in symbols.env:
                dims = ", ".join(_dim_str(d) for d in b.shape) + ("," if len(b.shape) == 1 else "")
                missing.setdefault(sym, []).append((v.name, f'T.Buffer(({dims}), "{b.dtype}")', True))
    return missing


def _values(func, buffers: dict, given: dict, symbols: Symbols, written: set, seed: int):
    """(the arguments, in order; the buffers made up at random; those zero-filled): given values
    as given, a buffer the kernel writes zero-filled, one it only reads random."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values: list = []
    random_names, zeroed = [], []
    for v in func.params:
        b = buffers[v.name]
        g = given.get(v.name)
        if b is None:
            value = g.value.item() if g is not None and getattr(g.value, "ndim", None) == 0 else \
                (g.value if g is not None else symbols.env[v.name])
            values.append(float(value) if is_float_dtype(v.dtype) else value)
            continue
        if g is not None:
            values.append(np.ascontiguousarray(g.value) if isinstance(g.value, np.ndarray) else g.value)
            continue
        shape = tuple(int(symbols.value(d)) for d in b.shape)
        if v.name in written:
            values.append(zeros(shape, b.dtype))
            zeroed.append(v.name)
        else:
            values.append(random_array(shape, b.dtype, rng))
            random_names.append(v.name)
    return values, random_names, zeroed


def _dim_str(d) -> str:
    """A buffer dimension as TVMScript writes it."""
    from .. import tir

    if isinstance(d, tir.IntImm):
        return str(d.value)
    if isinstance(d, tir.Var):
        return d.name
    from ..compiler.vm_specs import dim_text

    return dim_text(d)
