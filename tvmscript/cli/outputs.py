"""What `tvms run` shows of a call: a table of the outputs (shape, dtype, the first values) and
the times, in color on a terminal; and the outputs saved with ``--out``."""

from __future__ import annotations

import sys

from .calls import CallResult
from .reporting import fail
from .writing import write_new_atomically


def print_outputs(result: CallResult, prepared: str, prepared_s: float, color: bool) -> None:
    """The outputs' table, then the time to prepare them (``prepared``: compile, or load for a
    library) and the times of the calls."""
    rows = [(n, "(" + ", ".join(map(str, a.shape)) + ("," if a.ndim == 1 else "") + ")", str(a.dtype),
             _value_view(a)) for n, a in result.outputs]
    ordered = sorted(result.times)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    timing = [f"{prepared}: {_fmt_seconds(prepared_s)}",
              f"run: median {_fmt_seconds(median)} over {n} run{'s' if n != 1 else ''} "
              f"(min {_fmt_seconds(ordered[0])}; first call {_fmt_seconds(result.first_s)})"]
    header = ("output", "shape", "dtype", "values")
    if color:
        from rich.console import Console
        from rich.table import Table

        table = Table(*header, header_style="bold")
        for row in rows:
            table.add_row(*row)
        console = Console(file=sys.stdout, highlight=False)
        if rows:
            console.print(table)
        else:
            console.print("(no outputs)")
        for line in timing:
            label, _, rest = line.partition(": ")
            console.print(f"[bold]{label}:[/bold] {rest}", markup=True)
        return
    lines = []
    if rows:
        widths = [max(len(r[k]) for r in [header, *rows]) for k in range(3)]
        for r in [header, *rows]:
            lines.append("  ".join(r[k].ljust(widths[k]) for k in range(3)) + "  " + r[3])
    else:
        lines.append("(no outputs)")
    sys.stdout.write("\n".join(lines + timing) + "\n")


def save_outputs(path: str, outputs: list) -> None:
    """``--out FILE.npz``: the named outputs as one archive."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{n: a for n, a in outputs})
    try:
        write_new_atomically(path, buffer.getvalue())
    except OSError as err:
        raise fail(f"cannot write {path}: {err.strerror or err}") from None


def _value_view(a) -> str:
    """A short one-line numpy-style view of an array's values."""
    import numpy as np

    a = np.asarray(a)
    shown = a if a.size <= 6 else a.ravel()
    try:
        text = np.array2string(shown, threshold=6, edgeitems=3, precision=4, separator=", ",
                               max_line_width=1 << 20, suppress_small=True)
    except Exception:  # an exotic dtype NumPy cannot format
        text = repr(shown.tolist()[:6])
    return " ".join(line.strip() for line in text.splitlines())


def _fmt_seconds(seconds: float) -> str:
    ms = seconds * 1000.0
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"
