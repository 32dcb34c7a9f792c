"""`tvms run` of a Relax function: its inputs read or made up from its parameters' struct info,
the calls of extern functions nobody registered refused before it runs, its result named as the
outputs ``output``, ``output_0``, ``output_1``, ..."""

from __future__ import annotations

from .calls import CallOptions, CallResult, announce_random, on_device, synced, timed
from .inputs import given_value, read_given
from .program import Program
from .symbols import Symbols, missing_symbols_error, sinfo_names
from .synthesis import random_value


def call_relax(program: Program, name: str, func, options: CallOptions) -> CallResult:
    import time

    import numpy as np

    from ..printer import sinfo_text
    from ..runtime.vm import VirtualMachine

    params = [p.name_hint for p in func.params]
    sinfos = [p.struct_info for p in func.params]
    known = []
    for s in sinfos:
        sinfo_names(s, known)
    symbols = Symbols(options.shapes, known, name)
    given = read_given(options.given, params, name)

    t0 = time.perf_counter()
    ex = program.compile(program.module(), options.target, options.bounds_check)
    compile_s = time.perf_counter() - t0
    _check_externs(program, name, ex)

    # Bind the symbolic dims the given inputs fix, then make up the rest.
    values: list = [None] * len(params)
    for i, (pname, sinfo) in enumerate(zip(params, sinfos)):
        if pname in given:
            values[i] = given_value(sinfo, given[pname].value)
            _bind_from(symbols, sinfo, values[i], f"input '{pname}' (from {given[pname].source})")
    missing: dict = {}
    for pname, sinfo in zip(params, sinfos):
        if pname in given:
            continue
        for sym in sinfo_names(sinfo, []):
            if sym not in symbols.env:
                missing.setdefault(sym, []).append((pname, sinfo_text(sinfo), True))
    if missing:
        raise missing_symbols_error(missing, name)
    rng = np.random.default_rng(options.seed)
    random_names = []
    for i, (pname, sinfo) in enumerate(zip(params, sinfos)):
        if pname not in given:
            values[i] = random_value(sinfo, symbols, rng, f"{name}() parameter '{pname}'", pname)
            random_names.append(pname)
    announce_random(random_names, [], options.seed)

    dev, values = on_device(values, options.target)
    vm = VirtualMachine(ex, dev) if dev is not None else VirtualMachine(ex)
    f = vm[name]
    sources = {p: g.source for p, g in given.items()}
    call = (lambda: f(*values)) if dev is None else (lambda: synced(f(*values), dev))
    result, first, times = timed(program, call, options.repeat, sources)
    profile = vm.profile(name, *values, repeat=options.repeat) if options.profile else None
    return CallResult(_name_outputs(result, func.ret_struct_info), compile_s, first, times, profile)


def _bind_from(symbols: Symbols, sinfo, value, what: str) -> None:
    """Bind the symbols of ``sinfo`` to what the given ``value`` has for them."""
    import numpy as np

    from .. import relax

    if isinstance(sinfo, relax.TensorStructInfo) and hasattr(value, "shape"):
        symbols.bind(sinfo.shape, tuple(value.shape), what)
    elif isinstance(sinfo, relax.ShapeStructInfo) and isinstance(value, tuple):
        symbols.bind(sinfo.values, value, what)
    elif isinstance(sinfo, relax.PrimStructInfo) and sinfo.value is not None \
            and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        symbols.bind([sinfo.value], (value,), what)


def _name_outputs(result, sinfo) -> list:
    """[(name, NumPy array)]: ``output`` for one value, ``output_0``, ``output_1``, ... for a
    tuple (``output_1_0`` inside a nested one)."""
    import numpy as np

    from .. import relax

    out: list = []

    def add(value, s, name: str) -> None:
        if isinstance(s, relax.ShapeStructInfo) or (
            isinstance(value, tuple) and value and all(isinstance(v, int) for v in value)
            and not isinstance(s, relax.TupleStructInfo)
        ):
            out.append((name, np.asarray(value, dtype=np.int64)))
        elif isinstance(value, (tuple, list)):
            fields = s.fields if isinstance(s, relax.TupleStructInfo) else [None] * len(value)
            for k, (v, fs) in enumerate(zip(value, fields)):
                add(v, fs, f"{name}_{k}")
        elif hasattr(value, "numpy"):
            out.append((name, value.numpy()))
        else:
            out.append((name, np.asarray(value)))

    add(result, sinfo, "output")
    return out


def _check_externs(program: Program, name: str, ex) -> None:
    """A call of an extern function that nobody registered (the CLI registers none) is an
    error before the run, pointing at the call. Looks at ``name`` and the Relax functions it
    calls."""
    from .. import ir, relax
    from ..diagnostics import TVMScriptError
    from ..runtime.registry import REGISTRY

    skipped = ("struct_info", "ret_struct_info", "sinfo_args", "span", "comments", "attrs", "params")
    mod = program.module()
    seen: set = set()
    todo = [name]

    def visit(x, fname: str) -> None:
        if isinstance(x, relax.Call):
            for callee in [x.op, *x.args[:1]]:
                if isinstance(callee, relax.ExternFunc) and callee.global_symbol not in ex.kernels \
                        and callee.global_symbol not in REGISTRY:
                    raise program.report(TVMScriptError(
                        f"'{callee.global_symbol}' is an extern function, and none is registered in tvms run "
                        f"(called in function '{fname}')", x.span,
                        notes=["extern functions are registered from Python with tvms.register_func: put "
                               "the registrations in a file and pass it with --extern FILE.py"]))
            if isinstance(x.op, ir.GlobalVar):
                todo.append(x.op.name_hint)
        if isinstance(x, (list, tuple)):
            for y in x:
                visit(y, fname)
        elif isinstance(x, (relax.Expr, relax.Binding, relax.BindingBlock)):
            for field in type(x).__dataclass_fields__:
                if field not in skipped:
                    visit(getattr(x, field, None), fname)

    while todo:
        fname = todo.pop()
        if fname in seen:
            continue
        seen.add(fname)
        func = mod[fname] if fname in mod else None
        if isinstance(func, relax.Function):
            visit(func.body, fname)
