"""LLVM code generation for lowered TensorIR, with llvmlite's IR builder.

`codegen(funcs)` lowers each `tir.PrimFunc` (`compiler.lower_tir.lower`) and emits one LLVM
function per kernel into one `llvmlite.ir.Module`, for the host CPU (its triple, CPU name and
features, from `llvmlite.binding`) or the one an ``llvm -mcpu=...`` target names
(`HostTarget`). `optimize` runs LLVM's new pass manager (its default pipeline at the level
asked, with loop and SLP vectorization); `runtime.cpu` JIT-compiles the result with MCJIT.

The modules, each with the why of its part in its docstring:

- `target`       the CPU (`HostTarget`, `host_target`), LLVM's initialization and optimizer;
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
from .function import ASSERT_FAIL_SYMBOL, BOUNDS_FAIL_SYMBOL
from .kernel import CodegenResult, KernelInfo, codegen, symbol_name
from .statements import UNROLL_LIMIT
from .target import LLVM_WORKAROUND_OPTIONS, HostTarget, avoid_llvm_aborts, host_target, init_llvm, optimize

__all__ = ["codegen", "CodegenResult", "KernelInfo", "HostTarget", "host_target", "optimize", "vectorizable_call",
           "UNROLL_LIMIT", "UNROLL_BUDGET", "UNROLL_MAX_EXTENT", "symbol_name", "init_llvm", "avoid_llvm_aborts",
           "LLVM_WORKAROUND_OPTIONS", "ASSERT_FAIL_SYMBOL", "BOUNDS_FAIL_SYMBOL", "INLINE_MATH",
           "PARALLEL_MIN_WORK_PER_THREAD"]
