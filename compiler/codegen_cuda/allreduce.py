"""``tvm_thread_allreduce`` as CUDA C: a reduction across the threads of a block.

`lower_gpu.lower_cross_thread_reduction` leaves each thread its partial result and one
``T.tvm_thread_allreduce(combiner, value, tags...)``; after it, every reducing thread holds
the combination. Printed as, by how many threads reduce together (`AllreduceGen._allreduce_plan`):
- ``"warp"``: at most 32 along ``threadIdx.x``, a power of two: a butterfly of
  ``__shfl_xor_sync`` within the warp;
- ``"warps"``: a multiple of 32 along ``threadIdx.x``: a butterfly per warp, the warps'
  results through shared memory, and a second butterfly over them;
- ``"shared"``: any other shape: every thread's value in shared memory, each thread combining
  its group's in order.
Min and max of halfs use ``__hmax``/``__hmin``; 8- and 16-bit integers shuffle as ``int``.

`AllreduceGen` is mixed into `kernel.KernelGen`; it uses ``self.line``, ``self.expr``,
``self.fresh`` and ``self.kernel`` from there, and in trace mode reports its shared-memory
accesses and combining operations (`trace.TraceGen`). `combine_text` is also how expressions
print ``T.max``/``T.min``.
"""

from __future__ import annotations

from tvmscript.ir import tir

from ..lower_gpu import GPULoweringError, reduction_identity
from ..lower_tir import dtype_bytes
from .literals import HALF_TYPES, NARROW_INTS, ctype
from .trace import SHARED


class AllreduceGen:
    """The cross-thread reductions of a kernel being printed (mixed into `kernel.KernelGen`)."""

    def _allreduce_plan(self, call: tir.Call):
        combiner = call.args[0].value
        tags = [a.value for a in call.args[2:]]
        ext = {}
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            e = self.kernel.extents.get(tag)
            if e is not None and not isinstance(e, tir.IntImm):
                raise GPULoweringError(f"a reduction across threads needs a constant {tag} extent")
            ext[tag] = e.value if e is not None else 1
        total = ext["threadIdx.x"] * ext["threadIdx.y"] * ext["threadIdx.z"]
        n = 1
        for t in tags:
            n *= ext[t]
        if tags == ["threadIdx.x"] and n & (n - 1) == 0 and n <= 32 and (total % 32 == 0 or total <= 32):
            return combiner, tags, ext, total, n, "warp"
        if tags == ["threadIdx.x"] and n % 32 == 0 and total % 32 == 0:
            return combiner, tags, ext, total, n, "warps"
        return combiner, tags, ext, total, n, "shared"

    def allreduce_smem_bytes(self, call: tir.Call) -> int:
        """The shared memory the reduction needs, in bytes (`kernel.KernelGen` plans it)."""
        _, _, _, total, n, how = self._allreduce_plan(call)
        item = dtype_bytes(call.args[1].dtype)
        return {"warp": 0, "warps": total // 32 * item, "shared": total * item}[how]

    def allreduce(self, call: tir.Call) -> None:
        """``red[0]`` of every thread becomes the combination over the reducing threads."""
        combiner, tags, ext, total, n, how = self._allreduce_plan(call)
        red = call.args[1]
        dtype = red.dtype
        t = ctype(dtype)
        target = f"{self.name(red.buffer.data)}[{self.expr(red.indices[0])}]"
        ident = self.expr(reduction_identity(combiner, dtype))

        def comb(a, b):
            if tir.is_float(dtype):  # one operation per combination, in trace mode
                self.count_raw(0, int(dtype not in HALF_TYPES), int(dtype in HALF_TYPES), 0)
            return self.combine_text(combiner, dtype, a, b)

        lin = "((int)threadIdx.x + (int)blockDim.x * ((int)threadIdx.y + (int)blockDim.y * (int)threadIdx.z))"
        self.line("{")
        self.indent += 1
        if how in ("warp", "warps"):
            mask = "0xffffffffu" if total >= 32 else f"{(1 << total) - 1:#x}u"
            v = self.fresh("red")
            self.line(f"{t} {v} = {target};")
            width = min(n, 32)
            off = width // 2
            while off >= 1:
                self.line(f"{v} = {comb(v, self._shfl(mask, v, off, dtype))};")
                off //= 2
            if how == "warps":
                warps = n // 32
                smem = self.fresh("red_smem")
                self.line(f"__shared__ {t} {smem}[{total // 32}];")
                self.line(f"int lane = {lin} & 31, warp = {lin} >> 5;")
                self.line(f"if (lane == 0) {self.traced(f'{smem}[warp]', SHARED, store=True)} = {v};")
                self.line("__syncthreads();")
                group = f"(warp / {warps}) * {warps}"
                self.line(f"{v} = lane < {warps} ? {self.traced(f'{smem}[{group} + lane]', SHARED)} : {ident};")
                off = 16  # the whole warp's butterfly: every lane ends with the total
                while off >= 1:
                    self.line(f"{v} = {comb(v, self._shfl('0xffffffffu', v, off, dtype))};")
                    off //= 2
                self.line("__syncthreads();")
            self.line(f"{target} = {v};")
        else:
            smem = self.fresh("red_smem")
            self.line(f"__shared__ {t} {smem}[{total}];")
            self.line(f"{self.traced(f'{smem}[{lin}]', SHARED, store=True)} = {target};")
            self.line("__syncthreads();")
            acc = self.fresh("acc")
            self.line(f"{t} {acc} = {ident};")
            strides = {"threadIdx.x": 1, "threadIdx.y": ext["threadIdx.x"],
                       "threadIdx.z": ext["threadIdx.x"] * ext["threadIdx.y"]}
            base = lin + "".join(f" - (int)threadIdx.{t_[-1]} * {strides[t_]}" for t_ in tags)
            index = base
            for tag in tags:
                r = self.fresh("r")
                self.line(f"for (int {r} = 0; {r} < {ext[tag]}; ++{r}) {{")
                self.indent += 1
                index += f" + {r} * {strides[tag]}"
            self.line(f"{acc} = {comb(acc, self.traced(f'{smem}[{index}]', SHARED))};")
            for _ in tags:
                self.indent -= 1
                self.line("}")
            self.line("__syncthreads();")
            self.line(f"{target} = {acc};")
        self.indent -= 1
        self.line("}")

    def _shfl(self, mask: str, v: str, off: int, dtype: str) -> str:
        if dtype in ("bool", "int8", "uint8", "int16", "uint16"):
            return f"({ctype(dtype)})__shfl_xor_sync({mask}, (int){v}, {off}, 32)"
        return f"__shfl_xor_sync({mask}, {v}, {off}, 32)"

    def combine_text(self, combiner: str, dtype: str, a: str, b: str) -> str:
        if combiner == "sum":
            return f"({a} + {b})"
        if combiner == "prod":
            return f"({a} * {b})"
        fn = "max" if combiner == "max" else "min"
        if dtype in HALF_TYPES:
            return f"__h{fn}({a}, {b})"
        if dtype == "bool":
            return f"({a} {'||' if fn == 'max' else '&&'} {b})"
        if dtype in NARROW_INTS:
            return f"(({ctype(dtype)}){fn}((int){a}, (int){b}))"
        return f"{fn}({a}, {b})"
