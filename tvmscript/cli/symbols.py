"""The values of a function's symbolic dimensions (and a prim_func's scalar parameters) in
`tvms run`: given with ``--shape``, read off the shapes of the given inputs, and the error that
names each one still missing and how to give it."""

from __future__ import annotations

from .reporting import Failure, fail


def parse_shapes(items: list) -> dict:
    """{name: value} from --shape n=8 (repeatable, or comma-separated)."""
    values: dict = {}
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, text = part.partition("=")
            name = name.strip()
            text = text.strip()
            if not sep or not name.isidentifier():
                raise fail(f"--shape expects SYM=N (e.g. --shape n=8), got {part!r}")
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    raise fail(f"--shape {part}: {text!r} is not a number") from None
            values[name] = value
    return values


def tir_names(e, out: list) -> list:
    """Names of the variables in a TIR expression, in order of appearance."""
    from .. import tir

    if isinstance(e, tir.Var):
        if e.name not in out:
            out.append(e.name)
        return out
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, field, None)
        if isinstance(sub, tir.PrimExpr):
            tir_names(sub, out)
    return out


def sinfo_names(sinfo, out: list) -> list:
    """Symbolic names a Relax struct info mentions."""
    from .. import relax

    if isinstance(sinfo, relax.TensorStructInfo) and sinfo.shape is not None:
        for d in sinfo.shape:
            tir_names(d, out)
    elif isinstance(sinfo, relax.ShapeStructInfo) and sinfo.values is not None:
        for d in sinfo.values:
            tir_names(d, out)
    elif isinstance(sinfo, relax.PrimStructInfo) and sinfo.value is not None:
        tir_names(sinfo.value, out)
    elif isinstance(sinfo, relax.TupleStructInfo):
        for f in sinfo.fields:
            sinfo_names(f, out)
    return out


class Symbols:
    """Values of symbolic dimensions: from --shape first, then from the given inputs."""

    def __init__(self, shapes: dict, known: list, fname: str, float_ok=(), scalars: bool = False) -> None:
        what = "symbolic dimension or scalar parameter" if scalars else "symbolic dimension"
        for name, value in shapes.items():
            if name not in known:
                listed = f"it has: {', '.join(known)}" if known else "it has none"
                raise fail(f"--shape {name}={value}: {fname}() has no {what} '{name}' ({listed})")
            if isinstance(value, float) and name not in float_ok:
                raise fail(f"--shape {name}={value}: '{name}' is a dimension, which takes a whole number")
        self.env = dict(shapes)
        self.origin = {name: f"--shape {name}={value}" for name, value in shapes.items()}

    def bind(self, dims, values, what: str) -> None:
        """Bind the plain symbols of ``dims`` to ``values``; other mismatches are the VM's to report."""
        from .. import tir

        if dims is None or len(dims) != len(values):
            return
        for d, (e, v) in enumerate(zip(dims, values)):
            if not isinstance(e, tir.Var):
                continue
            v = int(v)
            old = self.env.get(e.name)
            if old is None:
                self.env[e.name] = v
                self.origin[e.name] = f"{what}, dimension {d}"
            elif old != v and self.origin[e.name].startswith("--shape"):
                raise fail(f"{what} has {e.name} = {v} (dimension {d}), but {self.origin[e.name]}")

    def value(self, e):
        from ..compiler.vm_specs import dim_spec
        from ..runtime.value_specs import eval_dim

        return eval_dim(dim_spec(e), self.env)


def missing_symbols_error(missing: dict, fname: str) -> Failure:
    """``missing``: symbol -> [(parameter, its annotation, whether an input array can give the
    symbol)]."""
    lines = []
    for name, uses in missing.items():
        users = ", ".join(f"'{p}' {ann}" for p, ann, _ in uses)
        carriers = [p for p, _, array in uses if array]
        how = f"--shape {name}=VALUE"
        if carriers:
            how += f", or an input that has it (--input {carriers[0]}=FILE.npy)"
        lines.append(f"  {name}: used by {users}; pass {how}")
    names = ", ".join(f"'{n}'" for n in missing)
    what = "values for" if len(missing) > 1 else "a value for"
    return Failure(f"error: {fname}() needs {what} {names}, which no input gives:\n" + "\n".join(lines))
