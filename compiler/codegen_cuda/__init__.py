"""CUDA C for thread-bound TensorIR: the GPU backend's code generator.

`codegen_cuda(funcs)` lowers each prim_func with `compiler.lower_gpu` and prints one
translation unit holding an ``extern "C" __global__`` function per kernel::

    extern "C" __global__ void __launch_bounds__(256) add(float* __restrict__ A, ...) {
      B[((int)blockIdx.x * 256) + (int)threadIdx.x] = ...;
    }

with the launch of each (grid and block dimensions from the thread bindings, as texts over
the function's symbolic variables, evaluated at launch) in a `cuda_spec.CUDAFunction`.

The modules, each with what it prints and why in its docstring:

- `source`       `codegen_cuda`: the translation unit, each kernel's parameters and launch;
- `kernel`       one kernel (`KernelGen`): names, local and shared memory, statements, loops;
                 `KernelGen` gathers the parts below;
- `vectorize`    ``T.vectorized`` loops as vector loads and stores (``float4``, ``half2``...);
- `allreduce`    ``tvm_thread_allreduce`` as warp shuffles and shared memory;
- `wmma`         tensor-core fragments and intrinsics (``nvcuda::wmma``);
- `ptx`          PTX's ldmatrix, mma.sync and cp.async (TVM's ``ptx_*`` builtins) as calls of
                 inline-assembly helpers, and the helpers;
- `expressions`  arithmetic, casts, math functions, intrinsics;
- `checks`       the bounds checks left to run time: on the host, or recorded by the kernel;
- `trace`        the trace mode the CPU emulator counts accesses and operations with;
- `literals`     CUDA's spellings of dtypes, constants and names.
"""

from .kernel import STATIC_SHARED_LIMIT
from .literals import ctype
from .source import CUDASource, codegen_cuda, kernel_symbol

__all__ = ["codegen_cuda", "CUDASource", "STATIC_SHARED_LIMIT", "ctype", "kernel_symbol"]
