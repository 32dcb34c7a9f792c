"""PTX's tensor-core and asynchronous-copy builtins as CUDA C: ldmatrix, mma.sync, cp.async.

TVM's ``ptx_ldmatrix``, ``ptx_mma``, ``ptx_cp_async``, ``ptx_commit_group`` and
``ptx_wait_group`` (what a software-pipelined tensor-core matmul is written with) name PTX
instructions that CUDA C has no function for. Each becomes a call of a small
``__device__ __forceinline__`` helper whose body is the instruction as inline ``asm volatile``
(`HELPERS`): the kernel text stays readable, and the CPU emulator, which cannot run PTX, defines
helpers of the same names itself (``tests/support/cuda_emulator_ptx.h``). The prelude holds only
the helpers the translation unit calls (`helper_definitions`), inside ``#ifndef
TVMS_CUDA_EMULATOR`` so that the emulator's take their place.

Register operands (the A, B and C fragments of ``mma``, ldmatrix's destination) are per-thread
``local`` arrays, passed as pointers (``reinterpret_cast<unsigned*>(A_local + 8)``): once the
loops around them are unrolled their indices are constants, and NVRTC keeps the arrays in
registers. Such arrays are declared 16-byte aligned (`register_arrays`), as a 32-bit view of a
``half`` array needs at least 4 if it ever lives in local memory.

The instructions need a recent GPU: ldmatrix sm_75, mma.sync's m16n8k16/m16n8k8 forms and
cp.async sm_80. A target architecture below that is a `GPULoweringError` when the printer knows
it (``self.arch``), and an ``#error`` from NVRTC otherwise.

In trace mode (`trace`): each mma reports one tensor-core operation of its shape; an ldmatrix
reports one 16-byte shared load per lane that gives a row address (8 per matrix: one phase of 8
lanes per matrix, as the hardware reads them); a cp.async reports a global load of its bytes
(none when its predicate is false) and a shared store. They are never "reused" loads: the
instructions are ``asm volatile``, which no compiler merges.

`PtxGen` is mixed into `kernel.KernelGen`; it uses ``self.expr``, ``self.arch``, the data
spaces (``data_space``, ``self.local_data``) and the trace mode's ``traced_mma`` and
``next_site`` from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ..lower_gpu import GPULoweringError
from ..lower_tir import dtype_bytes
from .trace import GLOBAL, NO_REUSE, SHARED, STORE

PTX_OPS = ("tir.ptx_ldmatrix", "tir.ptx_mma", "tir.ptx_cp_async", "tir.ptx_commit_group", "tir.ptx_wait_group",
           "tir.ptx_wgmma", "tir.ptx_wgmma_desc", "tir.ptx_wgmma_fence", "tir.ptx_wgmma_commit_group",
           "tir.ptx_wgmma_wait_group", "tir.ptx_fence_proxy_async")
# Hopper's warpgroup MMA (`wgmma` below): the N of ``m64nNkK`` a kernel may use, and the
# operand types (TVM's spellings: their PTX type and the K of one instruction, 32 bytes of
# each row) and accumulator types it takes.
WGMMA_N = (64, 128, 256)
WGMMA_INPUTS = {"fp16": ("f16", 16), "bf16": ("bf16", 16), "tf32": ("tf32", 8)}
WGMMA_TILE_ALIGN = 1024   # bytes: one 128-byte swizzle's period (8 rows of 128 bytes)
WGMMA_ACCUMULATORS = {"fp32": ("float", "f32"), "fp16": ("unsigned", "f16")}


@dataclass(frozen=True)
class MmaForm:
    """One supported ``mma.sync`` form: its helper, the C types of the pointers it takes (A and
    B, C) and the dtype that names its precision in trace mode."""

    helper: str
    shape: tuple
    operand_ctype: str
    accumulator_ctype: str
    input_dtype: str


# (shape, A dtype, B dtype, C dtype) as TVM spells them -> the form.
MMA_FORMS = {
    ("m16n8k16", "fp16", "fp16", "fp32"): MmaForm("tvms_mma_m16n8k16_f32_f16", (16, 8, 16), "unsigned", "float",
                                                  "float16"),
    ("m16n8k16", "bf16", "bf16", "fp32"): MmaForm("tvms_mma_m16n8k16_f32_bf16", (16, 8, 16), "unsigned", "float",
                                                  "bfloat16"),
    ("m16n8k16", "fp16", "fp16", "fp16"): MmaForm("tvms_mma_m16n8k16_f16_f16", (16, 8, 16), "unsigned", "unsigned",
                                                  "float16"),
    ("m16n8k8", "tf32", "tf32", "fp32"): MmaForm("tvms_mma_m16n8k8_f32_tf32", (16, 8, 8), "float", "float", "float32"),
}
_DTYPE_SPELLINGS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "tensorfloat32": "tf32"}
_COPY_TYPES = {4: "unsigned", 8: "uint2", 16: "uint4"}   # what a cp.async of that many bytes moves
_ROW_TYPE = "uint4"                                       # one ldmatrix row: 16 bytes


# ----------------------------------------------------------------------------- the helpers


@dataclass(frozen=True)
class Helper:
    """A prelude function: the sm it needs, the helpers it calls, its text."""

    sm: int
    needs: tuple
    text: str


def _ldmatrix_helper(num: int, trans: bool) -> Helper:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: ``num`` registers from the row
    address this lane gives (lanes 8j..8j+7 give matrix j's rows)."""
    suffix = "_trans" if trans else ""
    regs = ", ".join(f"%{i}" for i in range(num))
    outs = ", ".join(f'"=r"(dst[{i}])' for i in range(num))
    return Helper(75, (), f"""\
__device__ __forceinline__ void tvms_ldmatrix_x{num}{suffix}(unsigned* dst, const void* smem_row) {{
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [%{num}];\\n"
               : {outs} : "r"(addr));
}}""")


def _mma_helper(form: MmaForm, ptx_types: str) -> Helper:
    """``mma.sync.aligned.{shape}.row.col.{ptx_types}``, D = A * B + C with D the C registers
    (accumulated in place). tf32 inputs are rounded from fp32 first (``cvt.rna``, as the
    emulator does) rather than left to the tensor core, which ignores their low 13 bits."""
    m, n, k = form.shape
    c_regs = 2 if form.accumulator_ctype == "unsigned" else 4
    c_constraint = "+r" if c_regs == 2 else "+f"
    c_list = ", ".join(f"%{i}" for i in range(c_regs))
    a_list = ", ".join(f"%{c_regs + i}" for i in range(4))
    b_list = ", ".join(f"%{c_regs + 4 + i}" for i in range(2))
    outs = ", ".join(f'"{c_constraint}"(c[{i}])' for i in range(c_regs))
    tf32 = form.operand_ctype == "float"
    ins = ", ".join([f'"r"(tvms_to_tf32(a[{i}]))' if tf32 else f'"r"(a[{i}])' for i in range(4)]
                    + [f'"r"(tvms_to_tf32(b[{i}]))' if tf32 else f'"r"(b[{i}])' for i in range(2)])
    op = f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{ptx_types}"
    return Helper(80, ("tvms_to_tf32",) if tf32 else (), f"""\
__device__ __forceinline__ void {form.helper}({form.accumulator_ctype}* c, const {form.operand_ctype}* a, \
const {form.operand_ctype}* b) {{
  asm volatile("{op} {{{c_list}}}, {{{a_list}}}, {{{b_list}}}, {{{c_list}}};\\n"
               : {outs}
               : {ins});
}}""")


def _cp_async_helper(nbytes: int, zfill: bool) -> Helper:
    """``cp.async`` of ``nbytes`` from global to shared memory (``.cg``, past L1, for 16 bytes,
    the only size it takes; ``.ca`` otherwise); ``_zfill``: the source size is 0 when ``pred``
    is false, which writes zeros and reads nothing."""
    level = "cg" if nbytes == 16 else "ca"
    name = f"tvms_cp_async{nbytes}" + ("_zfill" if zfill else "")
    params = "void* smem, const void* gmem" + (", bool pred" if zfill else "")
    operands = '"r"(s), "l"(g)'
    if zfill:
        asm = f'"cp.async.{level}.shared.global [%0], [%1], {nbytes}, %2;\\n" :: {operands}, "r"(pred ? {nbytes} : 0)'
    else:
        asm = f'"cp.async.{level}.shared.global [%0], [%1], {nbytes};\\n" :: {operands}'
    return Helper(80, (), f"""\
__device__ __forceinline__ void {name}({params}) {{
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  size_t g = __cvta_generic_to_global(gmem);
  asm volatile({asm} : "memory");
}}""")


def wgmma_helper_name(n: int, acc: str, inputs: str, trans_a: int, trans_b: int) -> str:
    """The helper of ``wgmma.mma_async.m64n{n}k{k}.{acc}.{inputs}.{inputs}`` with the operands'
    majorness (0: K-major, 1: M- or N-major) in its name."""
    ptx, k = WGMMA_INPUTS[inputs]
    return f"tvms_wgmma_m64n{n}k{k}_{WGMMA_ACCUMULATORS[acc][1]}_{ptx}_t{trans_a}{trans_b}"


def _wgmma_helper(n: int, acc: str, inputs: str, trans_a: int, trans_b: int) -> Helper:
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}``, D = A * B + D with A and B in shared memory
    (their descriptors, `tvms_wgmma_desc`) and D the thread's accumulator registers: ``n / 2``
    floats, or ``n / 4`` registers of two halves. Asynchronous: the registers are D only after
    the ``wgmma.wait_group`` that covers the group it was committed in. TF32 operands are read
    from float32 tiles as they are (the tensor cores use their top 19 bits) and must both be
    K-major: PTX has no transpose immediates for them."""
    ctype, acc_ptx = WGMMA_ACCUMULATORS[acc]
    ptx, k = WGMMA_INPUTS[inputs]
    regs = n // 2 if ctype == "float" else n // 4
    constraint = "+f" if ctype == "float" else "+r"
    d_list = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"{constraint}"(d[{i}])' for i in range(regs))
    op = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc_ptx}.{ptx}.{ptx}"
    transposes = "" if inputs == "tf32" else f", {trans_a}, {trans_b}"
    return Helper(90, (), f"""\
__device__ __forceinline__ void {wgmma_helper_name(n, acc, inputs, trans_a, trans_b)}({ctype}* d, \
unsigned long long desc_a, unsigned long long desc_b) {{
  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"
               "{op} {{{d_list}}}, %{regs}, %{regs + 1}, p, 1, 1{transposes};\\n}}\\n"
               : {outs}
               : "l"(desc_a), "l"(desc_b), "r"(1)
               : "memory");
}}""")


def _helpers() -> dict:
    out = {}
    for num in (1, 2, 4):
        for trans in (False, True):
            out[f"tvms_ldmatrix_x{num}{'_trans' if trans else ''}"] = _ldmatrix_helper(num, trans)
    out["tvms_to_tf32"] = Helper(80, (), """\
__device__ __forceinline__ unsigned tvms_to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\\n" : "=r"(r) : "f"(x));
  return r;
}""")
    ptx_types = {"tvms_mma_m16n8k16_f32_f16": "f32.f16.f16.f32", "tvms_mma_m16n8k16_f32_bf16": "f32.bf16.bf16.f32",
                 "tvms_mma_m16n8k16_f16_f16": "f16.f16.f16.f16", "tvms_mma_m16n8k8_f32_tf32": "f32.tf32.tf32.f32"}
    for form in MMA_FORMS.values():
        out[form.helper] = _mma_helper(form, ptx_types[form.helper])
    for nbytes in _COPY_TYPES:
        for zfill in (False, True):
            out[f"tvms_cp_async{nbytes}{'_zfill' if zfill else ''}"] = _cp_async_helper(nbytes, zfill)
    out["tvms_cp_async_commit"] = Helper(80, (), """\
__device__ __forceinline__ void tvms_cp_async_commit() { asm volatile("cp.async.commit_group;\\n" ::: "memory"); }""")
    out["tvms_cp_async_wait"] = Helper(80, (), """\
template <int N> __device__ __forceinline__ void tvms_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\\n" :: "n"(N) : "memory");
}""")
    # Hopper (sm_90a): warpgroup MMA from shared memory.
    out["tvms_wgmma_desc"] = Helper(90, (), """\
__device__ __forceinline__ unsigned long long tvms_wgmma_desc(const void* smem, unsigned lbo, unsigned sbo) {
  unsigned long long addr = static_cast<unsigned long long>(__cvta_generic_to_shared(smem));
  return ((addr & 0x3FFFFull) >> 4) | (static_cast<unsigned long long>((lbo >> 4) & 0x3FFFu) << 16)
         | (static_cast<unsigned long long>((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}""")
    for n in WGMMA_N:
        for acc in WGMMA_ACCUMULATORS:
            for inputs in WGMMA_INPUTS:
                if acc == "fp16" and inputs != "fp16":
                    continue  # bfloat16 and TF32 products accumulate in float32 only
                for trans_b in ((0,) if inputs == "tf32" else (0, 1)):
                    out[wgmma_helper_name(n, acc, inputs, 0, trans_b)] = _wgmma_helper(n, acc, inputs, 0, trans_b)
    out["tvms_wgmma_fence"] = Helper(90, (), """\
__device__ __forceinline__ void tvms_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory"); }""")
    out["tvms_wgmma_commit"] = Helper(90, (), """\
__device__ __forceinline__ void tvms_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
}""")
    out["tvms_wgmma_wait"] = Helper(90, (), """\
template <int N> __device__ __forceinline__ void tvms_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(N) : "memory");
}""")
    out["tvms_fence_proxy_async"] = Helper(90, (), """\
__device__ __forceinline__ void tvms_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
}""")
    return out


HELPERS = _helpers()
_CALLED = re.compile(r"\b(tvms_[A-Za-z0-9_]+)\s*[(<]")


def helper_definitions(source: str) -> list:
    """The prelude lines defining the helpers ``source`` calls (and those they call), in
    `HELPERS` order, inside ``#ifndef TVMS_CUDA_EMULATOR``; empty if it calls none. An
    ``#error`` stops NVRTC when it compiles them for an architecture that lacks them."""
    used = {name for name in _CALLED.findall(source) if name in HELPERS}
    for name in list(used):
        used.update(HELPERS[name].needs)
    if not used:
        return []
    sm = max(HELPERS[n].sm for n in used)
    lines = ["#ifndef TVMS_CUDA_EMULATOR  // the CPU emulator defines these itself",
             f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < {sm * 10}",
             f'#error "ldmatrix, mma.sync and cp.async (TVM\'s ptx_* builtins) need sm_{sm} or newer"',
             "#endif"]
    for name, helper in HELPERS.items():
        if name in used:
            lines.extend(helper.text.splitlines())
    lines.append("#endif  // TVMS_CUDA_EMULATOR")
    return lines


# ----------------------------------------------------------------------------- printing the calls


class PtxGen:
    """The PTX builtins of a kernel being printed (mixed into `kernel.KernelGen`)."""

    arch: Optional[str] = None

    def ptx(self, call: tir.Call) -> str:
        """The helper call of one of `PTX_OPS` (TVM's argument order, its dtype first left out)."""
        op = call.op
        if op == "tir.ptx_ldmatrix":
            return self._ldmatrix(call)
        if op == "tir.ptx_mma":
            return self._mma(call)
        if op == "tir.ptx_cp_async":
            return self._cp_async(call)
        if op.startswith("tir.ptx_wgmma") or op == "tir.ptx_fence_proxy_async":
            return self._wgmma_op(call)
        self._require("cp.async", 80)
        if op == "tir.ptx_commit_group":
            return "tvms_cp_async_commit()"
        (n,) = call.args
        return f"tvms_cp_async_wait<{_const(n, 'ptx_wait_group', 'the number of groups left pending')}>()"

    def _ldmatrix(self, call: tir.Call) -> str:
        """(trans, num, ".b16", local_ptr, local_offset, smem_ptr, smem_offset)."""
        trans, num, btype, local, local_off, smem, smem_off = call.args
        self._require("ldmatrix", 75)
        num = _const(num, "ptx_ldmatrix", "the number of matrices")
        if num not in (1, 2, 4):
            raise GPULoweringError(f"ptx_ldmatrix loads 1, 2 or 4 matrices, not {num}")
        if not isinstance(btype, tir.StringImm) or btype.value != ".b16":
            raise GPULoweringError(f"ptx_ldmatrix loads .b16 elements, not {btype}")
        if dtype_bytes(call.dtype) != 2:
            raise GPULoweringError(f"ptx_ldmatrix loads 16-bit elements, not {call.dtype}")
        self._check_space("ptx_ldmatrix", "its destination", local, None)
        self._check_space("ptx_ldmatrix", "its source", smem, SHARED)
        row = self._address(smem, smem_off)
        if self.trace:
            row = f"tvms_trace_rows({self.next_site()}, {SHARED | NO_REUSE}, ({_ROW_TYPE}*)({row}), {8 * num})"
        helper = f"tvms_ldmatrix_x{num}{'_trans' if _const(trans, 'ptx_ldmatrix', 'trans') else ''}"
        return f"{helper}({self._registers('unsigned', local, local_off)}, {row})"

    def _mma(self, call: tir.Call) -> str:
        """(shape, A layout, B layout, A dtype, B dtype, C dtype, a, a_offset, b, b_offset, c,
        c_offset, saturate): C += A * B in place."""
        shape, a_layout, b_layout, a_dt, b_dt, c_dt, a, a_off, b, b_off, c, c_off, saturate = call.args
        key = (_string(shape),) + tuple(_DTYPE_SPELLINGS.get(_string(d), _string(d)) for d in (a_dt, b_dt, c_dt))
        form = MMA_FORMS.get(key)
        if form is None:
            known = "; ".join(f"{s} {ad} x {bd} -> {cd}" for s, ad, bd, cd in MMA_FORMS)
            raise GPULoweringError(f"ptx_mma {key[0]} {key[1]} x {key[2]} -> {key[3]} is not supported (supported: "
                                   f"{known})")
        if (_string(a_layout), _string(b_layout)) != ("row", "col"):
            got = f"({_string(a_layout)!r}, {_string(b_layout)!r})"
            raise GPULoweringError(f"ptx_mma {key[0]} takes A row-major and B column-major (\"row\", \"col\"), the "
                                   f"only layouts of mma.sync for that shape; got {got}")
        if _const(saturate, "ptx_mma", "saturate"):
            raise GPULoweringError("ptx_mma: saturate (.satfinite) applies to integer mma only")
        self._require("mma.sync", 80)
        for name, ptr in (("A", a), ("B", b), ("C", c)):
            self._check_space("ptx_mma", f"its {name} fragment", ptr, None)
        text = (f"{form.helper}({self._registers(form.accumulator_ctype, c, c_off)}, "
                f"{self._registers(form.operand_ctype, a, a_off)}, {self._registers(form.operand_ctype, b, b_off)})")
        return self.traced_mma(text, form.shape, form.input_dtype)

    def _wgmma_op(self, call: tir.Call) -> str:
        """Hopper's warpgroup MMA and what orders it: ``ptx_wgmma`` (shape, A dtype, B dtype,
        C dtype, trans_a, trans_b, d, d_offset, desc_a, desc_b), ``ptx_wgmma_desc`` (shared
        pointer, leading and stride byte offsets: a 128-byte-swizzled tile), the fence, commit
        and wait of its groups, and ``fence.proxy.async`` (what threads wrote to shared memory
        made visible to the tensor cores' reads)."""
        op = call.op
        self._require("wgmma", 90)
        if op == "tir.ptx_wgmma_fence":
            return "tvms_wgmma_fence()"
        if op == "tir.ptx_wgmma_commit_group":
            return "tvms_wgmma_commit()"
        if op == "tir.ptx_fence_proxy_async":
            return "tvms_fence_proxy_async()"
        if op == "tir.ptx_wgmma_wait_group":
            (n,) = call.args
            return f"tvms_wgmma_wait<{_const(n, 'ptx_wgmma_wait_group', 'the number of groups left pending')}>()"
        if op == "tir.ptx_wgmma_desc":
            ptr, lbo, sbo = call.args
            self._check_space("ptx_wgmma_desc", "its tile", ptr, SHARED)
            return f"tvms_wgmma_desc({self.expr(ptr)}, {self.expr(lbo)}, {self.expr(sbo)})"
        shape, a_dt, b_dt, c_dt, trans_a, trans_b, d, d_off, desc_a, desc_b = call.args
        m = re.fullmatch(r"m64n(\d+)k(\d+)", _string(shape))
        types = tuple(_DTYPE_SPELLINGS.get(_string(t), _string(t)) for t in (a_dt, b_dt, c_dt))
        n, k = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        ta, tb = _const(trans_a, "ptx_wgmma", "trans_a"), _const(trans_b, "ptx_wgmma", "trans_b")
        transposes = (0,) if types[0] == "tf32" else (0, 1)
        if (n not in WGMMA_N or types[0] != types[1] or types[0] not in WGMMA_INPUTS
                or k != WGMMA_INPUTS[types[0]][1] or types[2] not in WGMMA_ACCUMULATORS
                or (types[2] == "fp16" and types[0] != "fp16") or ta not in transposes or tb not in transposes):
            raise GPULoweringError(f"ptx_wgmma {_string(shape)} {' x '.join(types[:2])} -> {types[2]} "
                                   f"(trans {ta}, {tb}) is not supported (m64n{{{', '.join(map(str, WGMMA_N))}}}k16 "
                                   f"of fp16 or bf16 operands, fp32 or (for fp16) fp16 accumulators; k8 of tf32 "
                                   f"operands, both K-major, fp32 accumulators)")
        self._check_space("ptx_wgmma", "its accumulator", d, None)
        ctype = WGMMA_ACCUMULATORS[types[2]][0]
        text = (f"{wgmma_helper_name(n, types[2], types[0], ta, tb)}({self._registers(ctype, d, d_off)}, "
                f"{self.expr(desc_a)}, {self.expr(desc_b)})")
        # Counted per warp (trace mode): each of the warpgroup's 4 warps does 16 of its 64 rows.
        dtype = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32"}[types[0]]
        return self.traced_mma(text, (16, n, k), dtype)

    def _cp_async(self, call: tir.Call) -> str:
        """(shared_ptr, shared_offset, global_ptr, global_offset, bytes[, predicate])."""
        if len(call.args) not in (5, 6):
            raise GPULoweringError(f"ptx_cp_async takes 5 or 6 arguments after its dtype, not {len(call.args)}")
        smem, smem_off, gmem, gmem_off, nbytes = call.args[:5]
        pred = call.args[5] if len(call.args) == 6 else None
        self._require("cp.async", 80)
        nbytes = _const(nbytes, "ptx_cp_async", "the number of bytes")
        if nbytes not in _COPY_TYPES:
            raise GPULoweringError(f"ptx_cp_async copies 4, 8 or 16 bytes, not {nbytes}")
        self._check_space("ptx_cp_async", "its destination", smem, SHARED)
        self._check_space("ptx_cp_async", "its source", gmem, GLOBAL)
        dst, src = self._address(smem, smem_off), self._address(gmem, gmem_off)
        always = pred is None or (isinstance(pred, tir.IntImm) and pred.value)
        pred_text = None if always else self.expr(pred)
        if self.trace:
            word = _COPY_TYPES[nbytes]
            dst = f"tvms_trace({self.next_site()}, {SHARED | STORE}, ({word}*)({dst}))"
            if pred_text is None:
                src = f"tvms_trace({self.next_site()}, {GLOBAL | NO_REUSE}, (const {word}*)({src}))"
            else:
                src = f"tvms_trace_if({self.next_site()}, {GLOBAL | NO_REUSE}, (const {word}*)({src}), {pred_text})"
        if pred_text is None:
            return f"tvms_cp_async{nbytes}({dst}, {src})"
        return f"tvms_cp_async{nbytes}_zfill({dst}, {src}, (bool)({pred_text}))"

    # ---- operands
    def _address(self, ptr, offset) -> str:
        """``ptr`` (a data variable, ``tvm_access_ptr`` or ``address_of``) advanced by
        ``offset`` elements of its own type."""
        base = self.expr(ptr)
        if isinstance(offset, tir.IntImm) and offset.value == 0:
            return base
        return f"({base} + {self.expr(offset)})"

    def _registers(self, ctype: str, ptr, offset) -> str:
        """A per-thread array at ``offset`` viewed as the 32-bit registers an instruction takes."""
        return f"reinterpret_cast<{ctype}*>({self._address(ptr, offset)})"

    def _check_space(self, what: str, role: str, ptr, space: Optional[int]) -> None:
        """An error unless ``ptr`` points into the memory the instruction needs: shared memory
        (`SHARED`), global memory (`GLOBAL`) or a per-thread array (None)."""
        data = _target(ptr)
        if data is None:
            return  # a pointer computed some other way: the instruction itself will tell
        have = "fragment" if data in self.fragments else self.data_space(data)
        if have != space:
            names = {SHARED: "shared memory", GLOBAL: "global memory", None: "a per-thread ('local') array",
                     "fragment": "a wmma fragment"}
            raise GPULoweringError(f"{what}: {role} must be {names[space]}, but '{data.name}' is {names[have]}")

    def _require(self, what: str, sm: int) -> None:
        """An error when the target architecture is known to be older than sm_``sm``."""
        found = _sm(self.arch)
        if found is not None and found < sm:
            raise GPULoweringError(f"{what} needs sm_{sm} or newer; the target architecture is {self.arch}")


class _RegisterArrays(TIRVisitor):
    def __init__(self) -> None:
        self.found: set = set()

    def visit_Call(self, node) -> None:
        positions = {"tir.ptx_ldmatrix": (3,), "tir.ptx_mma": (6, 8, 10), "tir.ptx_wgmma": (6,)}.get(node.op, ())
        for i in positions:
            data = _target(node.args[i])
            if data is not None:
                self.found.add(data)
        self.generic_visit(node)


def calls_op(body, op: str) -> bool:
    """Whether ``body`` calls the builtin ``op``."""
    found = []

    class V(TIRVisitor):
        def visit_Call(self, node) -> None:
            if node.op == op:
                found.append(node)
            self.generic_visit(node)

    V().visit(body)
    return bool(found)


def register_arrays(body) -> set:
    """The data variables of the arrays ``body``'s PTX builtins use as registers."""
    v = _RegisterArrays()
    v.visit(body)
    return v.found


def _target(ptr) -> Optional[tir.Var]:
    """The data variable a pointer operand points into, if it says."""
    if isinstance(ptr, tir.Var):
        return ptr
    if isinstance(ptr, tir.Call) and ptr.op == "tir.tvm_access_ptr" and isinstance(ptr.args[1], tir.Var):
        return ptr.args[1]
    if isinstance(ptr, tir.Call) and ptr.op == "tir.address_of" and isinstance(ptr.args[0], tir.BufferLoad):
        return ptr.args[0].buffer.data
    return None


def _sm(arch: Optional[str]) -> Optional[int]:
    m = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch or "")
    return int(m.group(1)) if m else None


def _const(e, what: str, role: str) -> int:
    if not isinstance(e, tir.IntImm):
        raise GPULoweringError(f"{what}: {role} must be a constant, not {e}")
    return e.value


def _string(e) -> str:
    if not isinstance(e, tir.StringImm):
        raise GPULoweringError(f"ptx_mma: expected a string (a shape, layout or dtype), not {e}")
    return e.value
