"""``tvms run --profile --trace FILE.json`` (runtime/profiling.py): the Chrome trace's events
checked against the profile table printed in the same run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.cli import TVMS, tvms

from tvmscript.runtime.cpu import num_threads
from tvmscript.runtime.vm import ProfileReport

ROOT = Path(__file__).resolve().parents[2]


def table_rows(out: str) -> dict:
    """kernel -> (calls, total us) from the profile table ``tvms run --profile`` prints."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"(\S+)\s+(\d+)\s+([\d,]+\.\d)\s+([\d,]+\.\d)\s+[\d.]+$", line)
        if m and not line.startswith("total:"):
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3).replace(",", "")))
    return rows


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_the_trace_holds_every_kernel_allocation_and_call(tmp_path):
    trace = tmp_path / "trace.json"
    proc = tvms("run", ROOT / "samples" / "mlp.tvms", "--repeat", "3", "--trace", trace)  # --trace implies --profile
    assert proc.returncode == 0, proc.err
    rows = table_rows(proc.out)
    assert len(rows) >= 2 and any(name.startswith("fused_matmul_add_relu") for name in rows)
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {"tvms: profile of main", "VM: calls and allocations", f"cpu:0 ({num_threads()} threads): kernels"}
    slices = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in slices if e["tid"] == 1 and e["cat"] == "vm" and e["name"] == "main"] == ["main"] * 3
    for kernel, (calls, total_us) in rows.items():
        mine = [e for e in slices if e["tid"] == 2 and e["name"] == kernel]
        assert len(mine) == 3 * calls and all(e["cat"] == "kernel" for e in mine)
        assert sum(e["dur"] for e in mine) / 3 == pytest.approx(total_us, rel=1e-3, abs=0.1)
    allocations = [e for e in slices if e["name"] == "allocate"]
    assert allocations and all(e["args"]["dtype"] == "float32" for e in allocations)
    calls = [e for e in slices if e["name"] == "main"]
    for kernel in (e for e in slices if e["tid"] == 2):   # every kernel inside a call of main
        assert any(c["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= c["ts"] + c["dur"] + 1e-3 for c in calls)


def test_trace_times_are_relative_microseconds():
    events = [("vm", "main", 5_000, 3_000, None), ("device", "k", 6_000, 1_500, None),
              ("vm", "allocate", 5_500, 100, {"shape": "(2,)", "dtype": "float32"})]
    trace = ProfileReport("main", {"k": (1, 1.5e-6)}, 3e-6, "cpu:0", events=events).chrome_trace()
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["tid"], e["ts"], e["dur"]) for e in slices] == \
        [("main", 1, 0.0, 3.0), ("k", 2, 1.0, 1.5), ("allocate", 1, 0.5, 0.1)]
    assert slices[2]["args"] == {"shape": "(2,)", "dtype": "float32"}
