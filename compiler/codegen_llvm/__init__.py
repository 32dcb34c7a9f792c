"""LLVM code generation for lowered TensorIR, with llvmlite's IR builder.

`codegen(funcs)` lowers each `tir.PrimFunc` (`compiler.lower_tir.lower`) and emits one LLVM
function per kernel into one `llvmlite.ir.Module`, for the host CPU (its triple, CPU name and
features, from `llvmlite.binding`) or the one an ``llvm -mcpu=...`` target names
(`runtime.host_cpu.HostTarget`). `optimize` runs LLVM's new pass manager (its default pipeline
at the level asked, with loop and SLP vectorization); `compiler.build_cpu` JIT-compiles the
result with MCJIT.

The modules, each with the why of its part in its docstring:

- `target`       LLVM's initialization and optimizer (the CPU is `runtime.host_cpu.HostTarget`);
- `kernel`       `codegen`, and each kernel's function with the ABI the runtime calls (its
                 parameters from `compiler.kernel_params`, which the CUDA backend shares);
- `function`     the module and function being generated (`ModuleGen`, `FuncGen`), failed
                 checks; `FuncGen` gathers the four parts below;
- `statements`   stores, branches, allocations, serial, unrolled and vectorized loops;
- `parallel`     ``T.parallel`` loops, outlined and run on libgomp's thread pool;
- `expressions`  arithmetic (fused multiply-adds), comparisons, logic, casts;
- `calls`        intrinsics, the C math library, inline float32 ``exp``/``erf``, bounds checks;
- `cost`         work estimates of loop nests: what is unrolled, how many threads start;
- `dtypes`       TIR dtypes as LLVM types and constants.
"""

from .calls import INLINE_MATH, vectorizable_call
from .cost import PARALLEL_MIN_WORK_PER_THREAD, UNROLL_BUDGET, UNROLL_MAX_EXTENT
from .kernel import CodegenResult, codegen, symbol_name
from .statements import UNROLL_LIMIT
from .target import LLVM_WORKAROUND_OPTIONS, avoid_llvm_aborts, init_llvm, optimize

__all__ = ["codegen", "CodegenResult", "optimize", "vectorizable_call",
           "UNROLL_LIMIT", "UNROLL_BUDGET", "UNROLL_MAX_EXTENT", "symbol_name", "init_llvm", "avoid_llvm_aborts",
           "LLVM_WORKAROUND_OPTIONS", "INLINE_MATH",
           "PARALLEL_MIN_WORK_PER_THREAD"]
