"""How long a CUDA kernel should take on a named GPU, estimated without one: a roofline.

Why: the GPU speed work needs a compass on machines without a GPU. A kernel's time is set by
the resource it uses most for its size: DRAM, the L2 cache, the SMs' load/store data path
(shared memory and L1), their FP32 and special-function units, or their tensor cores. What it
asks of each is countable: `KernelCounters` holds what the CPU emulator counted when it ran the
kernel's traced CUDA C (``tests/support/cuda_counters.py``, `codegen_cuda.trace`), or what the
TensorIR alone says (`static_counts`, when no emulator is at hand). `GPUS` holds what each
resource delivers on each GPU, with where each number comes from.

The method (`estimate`), per kernel launch:

- DRAM: the unique bytes the kernel's buffers hold (read or written once each), over the HBM
  bandwidth: the compulsory traffic, as if every buffer went through DRAM once;
- L2: every 32-byte sector the warps' global requests touch, over the L2 bandwidth (no L1
  hits counted: an upper bound on what reaches L2);
- SM: the time of each SM-local pipeline, from the warp-level counts, summed:
  load/store wavefronts (one per clock and SM: shared-memory wavefronts, bank conflicts
  included, and one per 128-byte line a global request touches), FP32 instructions (FMAs and
  other float operations, fp16 through float as tvms prints them) at the FP32 rate, special
  functions (exp, log, sqrt...) at 16 per clock and SM, and tensor-core MMAs at the dense
  rate of their precision. Summed, not overlapped: an SM's warps take turns issuing, and in a
  kernel without software pipelining a block's phases (stage a tile, then compute on it)
  follow each other at barriers, so the pipelines overlap little. `Estimate.times` keeps each
  pipeline's own time (their max is the optimistic bound, which a kernel with a ``cp.async``
  software pipeline gets: its copies are in flight while it computes). The SM time is stretched by the
  waves of blocks: the busiest SM runs ``ceil(blocks / SMs)`` blocks;
- the estimate is the largest of DRAM, L2 and SM, plus the launch overhead, and ``bound``
  names the resource that sets it (an SM pipeline's name when the SM time wins).

Everything here is a model built from the datasheets: a kernel that hides latency badly (few
warps, dependent loads) takes longer than estimated, and the emulator's counts are of the CUDA
C, not of what nvcc makes of it (loads nvcc would keep in registers are modelled: see
``reused_loads``; integer index arithmetic is not counted). Measured on an H200 (docs/cuda.md),
large well-occupied kernels took 1.0-1.6x their estimates, and grids of a few blocks (resnet18's
convolutions at batch 1) up to 3.6x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from .codegen_cuda.trace import op_counts
from .lower_tir import dtype_bytes

__all__ = ["KernelCounters", "GPUSpec", "GPUS", "gpu_spec", "gpu_for_device", "Estimate", "estimate", "wave_factor",
           "static_counts", "static_estimate", "format_seconds", "TENSOR_PRECISIONS"]

TENSOR_PRECISIONS = ("fp16", "bf16", "tf32", "int8")
SECTOR_BYTES = 32
WARP = 32


# ----------------------------------------------------------------------------- counters


@dataclass
class KernelCounters:
    """What one kernel launch asks of a GPU, summed over its grid (counts of a sample of blocks
    are scaled up: ``blocks_run`` of ``blocks_total`` ran).

    Requests are warp-level memory instructions: per space and direction, their count, the
    distinct 32-byte sectors (global) they touch, the bytes their lanes ask for and the distinct
    128-byte lines (global; the L1's data wavefronts), or their wavefronts and the ideal (shared:
    one per phase used; the difference is bank conflicts). ``reused_loads``: loads the emulator
    found repeating an earlier load of the warp (kept in registers by nvcc), counted in no
    request. Thread-level operations (``fma``: fused multiply-adds; ``fp32_ops`` other float
    operations; ``fp16_ops`` on halfs and bfloat16s; ``special_ops`` exp, log, sqrt...) and
    their warp-level instructions (``*_inst``); ``mma``: warp-wide tensor-core operations, whose
    FLOPs by input precision are in ``tensor_flops``. ``dram_bytes``: the bytes of the buffers
    the launch touches (None when unknown)."""

    kernel: str = ""
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    blocks_run: int = 1
    blocks_total: int = 1
    global_load_requests: int = 0
    global_load_sectors: int = 0
    global_load_bytes: int = 0
    global_load_lines: int = 0
    global_store_requests: int = 0
    global_store_sectors: int = 0
    global_store_bytes: int = 0
    global_store_lines: int = 0
    shared_load_requests: int = 0
    shared_load_wavefronts: int = 0
    shared_load_ideal: int = 0
    shared_store_requests: int = 0
    shared_store_wavefronts: int = 0
    shared_store_ideal: int = 0
    reused_loads: int = 0
    fma: int = 0
    fp32_ops: int = 0
    fp16_ops: int = 0
    special_ops: int = 0
    fma_inst: int = 0
    fp32_inst: int = 0
    fp16_inst: int = 0
    special_inst: int = 0
    mma: int = 0
    tensor_flops: dict = field(default_factory=dict)
    dram_bytes: Optional[int] = None

    @property
    def global_sectors(self) -> int:
        return self.global_load_sectors + self.global_store_sectors

    @property
    def global_lines(self) -> int:
        return self.global_load_lines + self.global_store_lines

    def sectors_per_request(self, store: bool = False) -> float:
        """Sectors per global load (or store) request: 4 for 32 coalesced floats, 32 when each
        lane's float lies in a sector of its own."""
        req = self.global_store_requests if store else self.global_load_requests
        sectors = self.global_store_sectors if store else self.global_load_sectors
        return sectors / req if req else 0.0

    def ideal_sectors_per_request(self, store: bool = False) -> float:
        """The sectors per request the bytes asked for need at least (bytes / 32)."""
        req = self.global_store_requests if store else self.global_load_requests
        nbytes = self.global_store_bytes if store else self.global_load_bytes
        return nbytes / SECTOR_BYTES / req if req else 0.0

    @property
    def shared_wavefronts(self) -> int:
        return self.shared_load_wavefronts + self.shared_store_wavefronts

    @property
    def shared_ideal(self) -> int:
        return self.shared_load_ideal + self.shared_store_ideal

    @property
    def shared_conflicts(self) -> int:
        """Wavefronts beyond the ideal: what bank conflicts cost."""
        return self.shared_wavefronts - self.shared_ideal

    @property
    def flops(self) -> int:
        """Floating-point operations, an FMA and an MMA's multiply-adds counting two."""
        return 2 * self.fma + self.fp32_ops + self.fp16_ops + self.special_ops + sum(self.tensor_flops.values())

    def scaled(self, total: int, run: int) -> "KernelCounters":
        """The counts times ``total / run`` (from ``run`` blocks to a grid of ``total``), rounded
        to integers; exact when the product is an integer (a kernel whose blocks all do the same
        work)."""
        out = KernelCounters(**{f.name: getattr(self, f.name) for f in fields(self)})
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in _UNSCALED and isinstance(v, int):
                setattr(out, f.name, _scale(v, total, run))
        out.tensor_flops = {k: _scale(v, total, run) for k, v in self.tensor_flops.items()}
        return out

    def summary(self) -> str:
        """A few lines for a report: requests, sectors, wavefronts, instructions."""
        lines = [f"{self.kernel}: grid {self.grid}, block {self.block}"
                 + (f" ({self.blocks_run} of {self.blocks_total} blocks run, scaled)"
                    if self.blocks_run != self.blocks_total else "")]
        if self.global_load_requests or self.global_store_requests:
            lines.append(f"  global: {self.global_load_requests} loads ({self.sectors_per_request():.1f} sectors/"
                         f"request, ideal {self.ideal_sectors_per_request():.1f}), {self.global_store_requests} stores "
                         f"({self.sectors_per_request(True):.1f}, ideal {self.ideal_sectors_per_request(True):.1f})")
        if self.shared_load_requests or self.shared_store_requests:
            lines.append(f"  shared: {self.shared_load_requests} loads, {self.shared_store_requests} stores, "
                         f"{self.shared_wavefronts} wavefronts ({self.shared_conflicts} from bank conflicts)")
        lines.append(f"  FMA {self.fma_inst} + other fp {self.fp32_inst + self.fp16_inst} + special "
                     f"{self.special_inst} warp instructions, {self.mma} MMAs, {self.reused_loads} loads reused")
        return "\n".join(lines)


_UNSCALED = {"blocks_run", "blocks_total", "dram_bytes"}


def _scale(v: int, total: int, run: int) -> int:
    q, r = divmod(v * total, run)
    return q + (2 * r >= run)


# ----------------------------------------------------------------------------- the GPUs


@dataclass(frozen=True)
class GPUSpec:
    """What one GPU delivers: SMs and the boost clock (per-clock rates are per SM), peak
    non-tensor FP32 and dense tensor-core rates by input precision (TFLOP/s; int8 in TOP/s),
    DRAM and L2 bandwidth (GB/s), the L2's size, shared memory (bytes per clock and SM: 32
    banks of 4 bytes), special-function results per clock and SM, the cost of one kernel
    launch (µs, GPU side), and ``sources``: where each number comes from."""

    name: str
    arch: str
    sms: int
    clock_ghz: float
    fp32_tflops: float
    fp16_tflops: float
    bf16_tflops: float
    tf32_tflops: float
    int8_tops: float
    dram_gbs: float
    l2_gbs: float
    l2_bytes: int
    shared_bytes_per_clk: int = 128
    special_per_clk: int = 16
    launch_us: float = 2.0
    sources: tuple = ()

    def tensor_tflops(self, precision: str) -> float:
        return {"fp16": self.fp16_tflops, "bf16": self.bf16_tflops, "tf32": self.tf32_tflops,
                "int8": self.int8_tops}[precision]


_MB = 1024 * 1024
# Shared by every GPU below: the CUDA C Programming Guide, "Compute Capabilities", shared memory
# of 5.x and later (32 banks, each 32 bits wide per clock) and "Arithmetic Instructions" (16
# special-function results per clock and SM on 8.0 and 9.0); a launch's cost is a typical
# figure for back-to-back kernels on one stream, not a datasheet's.
_COMMON_SOURCES = (
    "shared memory: 32 banks x 4 bytes per clock and SM (CUDA C Programming Guide, Compute Capabilities, "
    "Shared Memory)",
    "special functions: 16 per clock and SM (CUDA C Programming Guide, Arithmetic Instructions, cc 8.0/9.0)",
    "launch: ~2 us per kernel back to back on one stream (typical; no datasheet gives it)",
)
_HOPPER_L2 = 4472 * 1.98  # bytes/clk x GHz = GB/s
_HOPPER_SOURCES = (
    "SMs 132, L2 50 MB: NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table 3 (H100 SXM5)",
    "clock 1.98 GHz: derived, FP32 67 TFLOPS / (2 x 128 FP32 lanes x 132 SMs)",
    "FP32 67, FP16/BF16 989.5, TF32 494.7 TFLOPS, INT8 1979 TOPS: the product page's figures with sparsity "
    "halved (dense), nvidia.com/en-us/data-center/h100 and /h200",
    "L2 4472 bytes/clk: measured on an H800 PCIe (GH100) by Luo et al., 'Benchmarking and Dissecting the Nvidia "
    "Hopper GPU Architecture', arXiv 2402.13499; NVIDIA publishes no Hopper L2 bandwidth",
)

GPUS = {
    "h100": GPUSpec("NVIDIA H100 SXM5 80 GB", "sm_90", 132, 1.98, 67.0, 989.5, 989.5, 494.7, 1979.0,
                    3350.0, _HOPPER_L2, 50 * _MB,
                    sources=_HOPPER_SOURCES + ("HBM3 3.35 TB/s: H100 product page (SXM)",) + _COMMON_SOURCES),
    "h200": GPUSpec("NVIDIA H200 SXM 141 GB", "sm_90", 132, 1.98, 67.0, 989.5, 989.5, 494.7, 1979.0,
                    4800.0, _HOPPER_L2, 50 * _MB,
                    sources=_HOPPER_SOURCES + ("HBM3e 4.8 TB/s, same GH100 compute as H100 SXM: H200 product page "
                                               "(SXM column)",) + _COMMON_SOURCES),
    "a100": GPUSpec("NVIDIA A100 SXM4 80 GB", "sm_80", 108, 1.41, 19.5, 312.0, 312.0, 156.0, 624.0,
                    2039.0, 5120 * 1.41, 40 * _MB,
                    sources=("SMs 108, boost 1410 MHz, FP32 19.5, FP16/BF16 312, TF32 156 TFLOPS, INT8 624 TOPS "
                             "(dense), L2 40 MB: NVIDIA A100 Tensor Core GPU Architecture whitepaper, Table 1",
                             "L2 read bandwidth 5120 bytes/clk: the same whitepaper, 'A100 L2 cache' section",
                             "HBM2e 2039 GB/s: A100 80GB SXM datasheet") + _COMMON_SOURCES),
}
_ALIASES = {"h100": "h100", "h100 sxm": "h100", "h100 sxm5": "h100", "h200": "h200", "h200 sxm": "h200",
            "a100": "a100", "a100 sxm": "a100", "a100 sxm4": "a100", "a100 80gb": "a100"}


def gpu_spec(name) -> GPUSpec:
    """The `GPUSpec` named ``name`` ("h200", "H100 SXM", "A100"), or ``name`` itself if it is
    one; KeyError naming the known GPUs otherwise."""
    if isinstance(name, GPUSpec):
        return name
    key = _ALIASES.get(" ".join(str(name).lower().replace("-", " ").split()))
    if key is None:
        raise KeyError(f"no GPU named {name!r}: known are {', '.join(GPUS)}")
    return GPUS[key]


def gpu_for_device(device_name: str) -> Optional[GPUSpec]:
    """The `GPUSpec` for a device name as CUDA reports it ("NVIDIA H200", "NVIDIA A100-SXM4-80GB"),
    None for one not in `GPUS`."""
    text = device_name.lower()
    for key in ("h200", "h100", "a100"):
        if key in text:
            return GPUS[key]
    return None


# ----------------------------------------------------------------------------- the estimate


@dataclass
class Estimate:
    """A kernel's estimated time on ``gpu`` (seconds, launch overhead included), the resource
    that ``bound``s it, and ``times``: each resource's own time (seconds; "dram", "l2", "sm"
    and the SM pipelines "load/store", "fp32", "special", "tensor")."""

    kernel: str
    gpu: str
    seconds: float
    bound: str
    times: dict
    launch_seconds: float = 0.0

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {format_seconds(v)}" for k, v in self.times.items() if v)
        return f"{self.kernel}: {format_seconds(self.seconds)} on {self.gpu}, bound by {self.bound} ({parts})"


def format_seconds(seconds: float) -> str:
    """``0.787 ms`` or ``38.2 us``: milliseconds from 0.1 ms up, microseconds below."""
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} us"


_SM_PIPES = ("load/store", "fp32", "special", "tensor")


def estimate(counters: KernelCounters, gpu="h200", dram_bytes: Optional[int] = None,
             launch: bool = True, pipelined: bool = False) -> Estimate:
    """The roofline estimate of one launch (see the module's docstring) from its counters, on
    the GPU named ``gpu``; ``dram_bytes`` overrides the counters' own. ``pipelined``: the
    kernel runs a software pipeline with asynchronous copies (``cp.async``), so its copies
    and its arithmetic overlap instead of taking turns at barriers: the SM time is the busiest
    pipeline's rather than their sum (`pipelined_kernel` tells from the CUDA C)."""
    g = gpu_spec(gpu)
    sm_clocks = g.sms * g.clock_ghz * 1e9            # SM-cycles per second, all SMs
    dram = dram_bytes if dram_bytes is not None else counters.dram_bytes or 0
    times = {"dram": dram / (g.dram_gbs * 1e9),
             "l2": counters.global_sectors * SECTOR_BYTES / (g.l2_gbs * 1e9)}
    pipes = {
        "load/store": (counters.shared_wavefronts + counters.global_lines) / sm_clocks,
        "fp32": (counters.fma_inst + counters.fp32_inst + counters.fp16_inst) * WARP / (g.fp32_tflops * 1e12 / 2),
        "special": counters.special_inst * WARP / (g.special_per_clk * sm_clocks),
        "tensor": sum(f / (g.tensor_tflops(p) * 1e12) for p, f in counters.tensor_flops.items() if f),
    }
    waves = wave_factor(counters.blocks_total, g.sms)
    pipes = {k: v * waves for k, v in pipes.items()}
    times["sm"] = max(pipes.values()) if pipelined else sum(pipes.values())
    times.update(pipes)
    main = max(("dram", "l2", "sm"), key=lambda k: times[k])
    bound = max(_SM_PIPES, key=lambda k: times[k]) if main == "sm" else main
    launch_s = g.launch_us * 1e-6 if launch else 0.0
    return Estimate(counters.kernel, g.name, times[main] + launch_s, bound, times, launch_s)


def pipelined_kernel(source: str, kernel: str) -> bool:
    """Whether kernel ``kernel`` of a CUDA translation unit issues asynchronous copies (the
    software pipelines of `lower_gpu.software_pipeline` do), for `estimate`'s ``pipelined``."""
    start = source.find(f" {kernel}(")
    if start < 0:
        return False
    end = source.find('extern "C"', start)
    return "tvms_cp_async" in source[start:end if end >= 0 else len(source)]


def wave_factor(blocks: int, sms: int) -> float:
    """How much longer than its even share the busiest SM works: it runs ``ceil(blocks / sms)``
    blocks where the average SM runs ``blocks / sms`` (fewer blocks than SMs: each runs one)."""
    if blocks <= 0:
        return 1.0
    return math.ceil(blocks / sms) * sms / blocks


# ----------------------------------------------------------------------------- from the TensorIR alone


def static_counts(func: tir.PrimFunc, sym_values: Optional[dict] = None, tensor_cores: bool = True,
                  name: str = "") -> KernelCounters:
    """Counters from a prim_func's TensorIR, without running it: the operations of each store
    times the iterations of the loops around it, and the bytes of its buffer parameters as its
    DRAM traffic. Memory requests are unknown (0). With ``tensor_cores``, the multiply-adds of
    float16/bfloat16 reductions count as tensor-core FLOPs (DLight's default schedule puts
    float16 matmuls on tensor cores); a ``T.tvm_mma_sync`` already in the TensorIR counts its
    fragments' m x n x k. Symbolic extents take ``sym_values`` (by name)."""
    env = {k: int(v) for k, v in (sym_values or {}).items()}
    out = KernelCounters(kernel=name, blocks_total=0, blocks_run=0)
    fragments = _Fragments()
    fragments.visit(func.body)
    _StaticWalk(out, env, tensor_cores, fragments).stmt(func.body, 1, 1)
    out.fma_inst, out.fp32_inst = -(-out.fma // WARP), -(-out.fp32_ops // WARP)
    out.fp16_inst, out.special_inst = -(-out.fp16_ops // WARP), -(-out.special_ops // WARP)
    nbytes = 0
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is not None:
            nbytes += math.prod(_const(d, env) for d in buf.shape) * dtype_bytes(buf.dtype)
    out.dram_bytes = nbytes
    return out


def static_estimate(func: tir.PrimFunc, gpu="h200", sym_values: Optional[dict] = None,
                    tensor_cores: bool = True, name: str = "") -> Estimate:
    """`estimate` from `static_counts`: the time at the GPU's peak FLOP rate and DRAM
    bandwidth, a lower bound (no memory requests, no bank conflicts, full SMs)."""
    return estimate(static_counts(func, sym_values, tensor_cores, name), gpu)


class _StaticWalk:
    """Sums the operations of a prim_func's stores times their loops' iterations."""

    def __init__(self, out: KernelCounters, env: dict, tensor_cores: bool, fragments: "_Fragments") -> None:
        self.out, self.env, self.tensor_cores, self.fragments = out, env, tensor_cores, fragments

    def stmt(self, s, times: int, lanes: int) -> None:
        """``s`` run ``times`` times, by ``lanes`` threads of a block at once (the product of
        the threadIdx loops around it)."""
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x, times, lanes)
        elif isinstance(s, tir.For):
            extent = _const(s.extent, self.env)
            thread = s.kind == "thread_binding" and (s.thread_tag or "").startswith("threadIdx")
            self.stmt(s.body, times * extent, lanes * extent if thread else lanes)
        elif isinstance(s, tir.BlockRealize):
            self.stmt(s.block, times, lanes)
        elif isinstance(s, tir.Block):
            for x in (s.init, s.body):
                if x is not None:
                    self.stmt(x, times, lanes)
        elif isinstance(s, tir.IfThenElse):
            for x in (s.then_case, s.else_case):
                if x is not None:
                    self.stmt(x, times, lanes)
        elif isinstance(s, tir.BufferStore):
            self.store(s, times)
        elif isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op == "tir.tvm_mma_sync":
            # Every lane of a warp calls it; it is one operation per warp.
            self.mma(s.value, times // lanes * max(1, lanes // WARP))
        elif hasattr(s, "body"):  # LetStmt, AttrStmt, Allocate, DeclBuffer, AssertStmt, While
            self.stmt(s.body, times, lanes)

    def store(self, s: tir.BufferStore, times: int) -> None:
        fma, fp32, fp16, special = (n * times for n in op_counts(s.value))
        if self.tensor_cores and s.buffer.dtype in ("float16", "bfloat16") and fma:
            key = "fp16" if s.buffer.dtype == "float16" else "bf16"
            self.out.tensor_flops[key] = self.out.tensor_flops.get(key, 0) + 2 * fma
            fma = 0
        self.out.fma += fma
        self.out.fp32_ops += fp32
        self.out.fp16_ops += fp16
        self.out.special_ops += special


    def mma(self, call: tir.Call, times: int) -> None:
        """A warp's ``tvm_mma_sync(d, di, a, ai, b, bi, c, ci)``: 2 m n k FLOPs at the precision
        of its A fragment."""
        m, n, k = self.fragments.shapes.get(call.args[0], (16, 16, 16))
        dtype = self.fragments.dtypes.get(call.args[2], "float16")
        key = {"float16": "fp16", "bfloat16": "bf16", "float32": "tf32"}.get(dtype, "int8")
        self.out.mma += times
        self.out.tensor_flops[key] = self.out.tensor_flops.get(key, 0) + 2 * m * n * k * times


class _Fragments(TIRVisitor):
    """The (m, n, k) of each tensor-core fragment (by data variable) from the intrinsics that
    fill, load or store it, and the dtype of each buffer allocated."""

    def __init__(self) -> None:
        self.shapes: dict = {}
        self.dtypes: dict = {}

    def visit_Block(self, node) -> None:
        for buf in node.alloc_buffers:
            self.dtypes[buf.data] = buf.dtype
        self.generic_visit(node)

    def visit_Call(self, node) -> None:
        if node.op in ("tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync") and \
                all(isinstance(a, tir.IntImm) for a in node.args[1:4]):
            self.shapes[node.args[0]] = tuple(a.value for a in node.args[1:4])
        self.generic_visit(node)


def _const(e, env: dict) -> int:
    """The value of an extent or dimension: a constant, or a symbolic variable in ``env``."""
    if isinstance(e, int):
        return e
    if isinstance(e, tir.IntImm):
        return e.value
    if isinstance(e, tir.Var) and e.name in env:
        return env[e.name]
    raise ValueError(f"the extent {e} is not a constant: give its symbols' values in sym_values")
