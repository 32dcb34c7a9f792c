"""What ``vm.profile(...)`` measures (`runtime.vm.VirtualMachine.profile`): the per-kernel
table TVM's profiler prints (`ProfileReport`), as text, as HTML in a notebook, and as a Chrome
trace of every kernel, allocation and call for Perfetto (``tvms run --profile --trace``)."""

from __future__ import annotations

__all__ = ["ProfileReport", "resource_columns"]


def resource_columns(ex) -> dict:
    """prim_func name -> (registers, occupancy) texts of the CUDA kernels it launches, from the
    compiler's ptxas report (`Executable.kernel_resources`); a function launching several kernels
    has their values joined with " / "."""
    columns: dict = {}
    for r in ex.kernel_resources().values():
        if r.ptxas is None:
            continue
        regs, occ = columns.setdefault(r.func, ([], []))
        regs.append(str(r.ptxas.registers))
        occ.append(str(r.occupancy) if r.occupancy is not None else "-")
    return {f: (" / ".join(regs), " / ".join(occ)) for f, (regs, occ) in columns.items()}



class ProfileReport:
    """`VirtualMachine.profile`'s result: ``rows`` are ``(kernel, calls, seconds)`` per call of
    the function, heaviest first; ``total`` is the whole call's seconds; ``resources`` (on a
    GPU, when the compiler's ptxas report is known) maps a kernel to its (registers, occupancy)
    texts, shown as two more columns."""

    def __init__(self, func_name: str, kernels: dict, total: float, device: str, resources=None,
                 events=None, device_track: str | None = None) -> None:
        self.func_name, self.total, self.device = func_name, total, device
        self.rows = sorted(((k, n, t) for k, (n, t) in kernels.items()), key=lambda r: -r[2])
        self.resources = dict(resources or {})
        # What happened, in order: (track "vm" or "device", name, start ns, duration ns, details).
        self.events = list(events or [])
        # The device track's name in a trace: where the kernels ran (the CPU's threads, a GPU stream).
        self.device_track = device_track or f"{device}: kernels"

    def chrome_trace(self) -> dict:
        """The events in the Chrome trace event format (what Perfetto and chrome://tracing
        open): one track for the VM (each call of the function, each allocation) and one for
        the device (each kernel, named where it ran: the CPU's threads, or the GPU stream;
        on a GPU, its time until the device synchronized after it)."""
        start = min((e[2] for e in self.events), default=0)
        tracks = {"vm": (1, "VM: calls and allocations"), "device": (2, self.device_track)}
        out = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": f"tvms: profile of {self.func_name}"}}]
        out += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": name}}
                for tid, name in tracks.values()]
        for track, name, t0, dur, details in self.events:
            event = {"ph": "X", "name": name, "cat": "kernel" if track == "device" else "vm", "pid": 1,
                     "tid": tracks[track][0], "ts": (t0 - start) / 1000.0, "dur": dur / 1000.0}
            if details:
                event["args"] = details
            out.append(event)
        return {"traceEvents": out, "displayTimeUnit": "ms"}

    def write_trace(self, path: str) -> None:
        """Write `chrome_trace` as JSON to ``path``."""
        import json

        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    @property
    def header(self) -> tuple:
        """The columns of `table`."""
        extra = ("Registers", "Occupancy") if self.resources else ()
        return ("Name", "Calls", "Total (us)", "Mean (us)", "Percent") + extra

    @property
    def vm_time(self) -> float:
        """Seconds of the call spent outside kernels: the VM's checks and allocations, externs."""
        return max(0.0, self.total - sum(t for _, _, t in self.rows))

    def table(self) -> list:
        """The report as rows of text: name, calls, total, mean, percent of the call (and, with
        ``resources``, registers and occupancy: `header`)."""
        def us(t: float) -> str:
            return f"{t * 1e6:,.1f}"

        rows = [(k, str(n), us(t), us(t / n) if n else "-", f"{100 * t / self.total:.1f}" if self.total else "-",
                 *self._resource_cells(k)) for k, n, t in self.rows]
        rows.append(("(VM: checks, allocation, externs)", "", us(self.vm_time), "",
                     f"{100 * self.vm_time / self.total:.1f}" if self.total else "-", *self._resource_cells(None)))
        rows.append((f"total: {self.func_name}", "1", us(self.total), us(self.total), "100.0",
                     *self._resource_cells(None)))
        return rows

    def _resource_cells(self, kernel) -> tuple:
        """A row's registers and occupancy cells: none without ``resources``, blank for the
        rows that are no kernel (``kernel`` None)."""
        if not self.resources:
            return ()
        return ("", "") if kernel is None else self.resources.get(kernel, ("-", "-"))

    def __str__(self) -> str:
        header = self.header
        rows = self.table()
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

        def line(r) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

        return "\n".join([f"profile of '{self.func_name}' on {self.device}", line(header)] + [line(r) for r in rows])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        """In a notebook: the table as HTML, each row's share of the call drawn as a bar."""
        import html

        header = self.header
        cells = "".join(f"<th style='text-align:{'left' if i == 0 else 'right'}'>{html.escape(h)}</th>"
                        for i, h in enumerate(header))
        rows = []
        for row, share in zip(self.table(), self._shares()):
            tds = []
            for i, cell in enumerate(row):
                text = html.escape(cell)
                if header[i] == "Percent" and share is not None:
                    text = (f"<div style='display:flex;align-items:center;gap:6px;justify-content:flex-end'>"
                            f"<div style='width:{max(share, 0.0) * 120:.1f}px;height:10px;background:#4c8bf5'></div>"
                            f"{text}</div>")
                tds.append(f"<td style='text-align:{'left' if i == 0 else 'right'}'>{text}</td>")
            rows.append("<tr>" + "".join(tds) + "</tr>")
        title = html.escape(f"profile of '{self.func_name}' on {self.device}")
        return (f"<table><caption style='text-align:left'>{title}</caption><thead><tr>{cells}</tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>")

    def _shares(self) -> list:
        """Each row of `table`'s share of the call (0..1; None for the total's row)."""
        total = self.total or 0.0
        shares = [t / total if total else 0.0 for _, _, t in self.rows]
        return shares + [self.vm_time / total if total else 0.0, None]
