"""Pass sequencing: `Sequential` and TVM's named pipelines (``get_pipeline("zero")``).

Why: the "zero" pipeline is the default lowering of a Relax module before build: legalize
the high-level ops into PrimFuncs, tag them with their fusion patterns, fold constants, fuse
and merge the fused PrimFuncs — in TVM's order, so its printed output matches TVM's.
"""

from __future__ import annotations

from tvmscript import ir


class Sequential:
    """Runs passes in order: ``Sequential([p1, p2])(mod) == p2(p1(mod))``."""

    def __init__(self, passes, name: str = "Sequential"):
        self.passes = list(passes)
        self.name = name

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        from tvmscript.compiler import progress

        for i, p in enumerate(self.passes):
            progress.report(f"{self.name} pipeline: {type(p).__name__}", i, len(self.passes))
            mod = p(mod)
        return mod


def zero_passes() -> list:
    """TVM's zero pipeline, in its order: legalize, tag patterns, fold constants, fuse."""
    from .annotate_tir_op_pattern import AnnotateTIROpPattern
    from .fold_constant import FoldConstant
    from .fuse_ops import FuseOps
    from .fuse_tir import FuseTIR
    from .legalize_ops import LegalizeOps

    return [LegalizeOps(), AnnotateTIROpPattern(), FoldConstant(), FuseOps(), FuseTIR()]


def zero_pipeline() -> Sequential:
    return Sequential(zero_passes(), "zero")


def inference_passes(func_name: str | None = None, target: str = "llvm") -> list:
    """The rewrites for running a model rather than training it, before the zero pipeline.

    Batch norms after a convolution fold into its weights when those are constants
    (FoldBatchnormToConv2D); the others become elementwise arithmetic (DecomposeOpsForInference)
    that FoldConstant folds where the statistics are constants and FuseOps fuses into the
    producing convolution or matmul as its epilogue otherwise. Then `_tidy_after` removes the
    tuples they leave. Attention written out by hand (matmul, softmax, matmul) becomes
    ``R.nn.attention`` (RewriteAttention), whose kernel never writes the scores out, once its
    causal mask is a constant the pass can read: on the CPU only (`_is_cuda`; for CUDA
    SplitAttention writes ``R.nn.attention`` out instead). For a CPU ``target``, a function whose
    2-D convolutions are all dense computes them in NHWC (`channels_last_for_cpu`).
    ``func_name``: only that function's batch norms."""
    from .split_attention import SplitAttention

    cuda = _is_cuda(target)
    return [*_inference_rewrites(func_name, attention=not cuda), *_tidy_after(),
            SplitAttention() if cuda else channels_last_for_cpu]


def _inference_rewrites(func_name: str | None = None, eval_mode_only: bool = False, attention: bool = True) -> list:
    """The batch-norm folding and decomposition, and (``attention``) RewriteAttention: what
    `inference_passes` and `EvalModeRewrites` both run (the latter on eval-mode batch norms
    only)."""
    from .decompose_ops import DecomposeOpsForInference
    from .fold_batchnorm import FoldBatchnormToConv2D
    from .fuse_attention import RewriteAttention

    passes = [FoldBatchnormToConv2D(eval_mode_only), DecomposeOpsForInference(func_name, eval_mode_only)]
    return passes + [RewriteAttention()] if attention else passes


def _is_cuda(target) -> bool:
    """Whether ``target`` (text or a `Target`) is a CUDA GPU's. Attention goes opposite ways
    there: on the CPU hand-written attention becomes ``R.nn.attention``, whose kernel streams
    the scores through a tile; on a GPU no DLight rule schedules that kernel (it would run as
    DLight's Fallback, one thread per score and a serial loop per row), while its matmuls and
    softmax, apart (SplitAttention), get the tensor-core and reduction schedules."""
    return str(target).split()[:1] == ["cuda"]


def _tidy_after() -> list:
    """CanonicalizeBindings removes the ``bn[0]`` reads the batch norms' tuples leave, and
    DeadCodeElimination the tuples: a read in between, or a tuple still holding the
    convolution's result, is a second consumer that keeps FuseOps from fusing what follows (a
    ReLU) into the convolution's kernel."""
    from .canonicalize_bindings import CanonicalizeBindings
    from .dead_code_elimination import DeadCodeElimination

    return [CanonicalizeBindings(), DeadCodeElimination()]


class EvalModeRewrites:
    """``IRModule -> IRModule``: what `default_pipeline` runs before zero. The batch norms marked
    ``training=False`` fold or decompose as in `inference_passes`, and hand-written attention
    becomes ``R.nn.attention`` (for the CPU): rewrites that keep the module's meaning whatever it is for. Only
    when one of them changed a function do the bindings get tidied (`_tidy_after`), so a module
    without such ops compiles exactly as written (its bindings, and the names errors cite)."""

    def __init__(self, target: str = "llvm") -> None:
        self.target = target

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        passes = _inference_rewrites(eval_mode_only=True, attention=not _is_cuda(self.target))
        rewritten = Sequential(passes, "eval-mode rewrites")(mod)
        before = {gv.name_hint: f for gv, f in mod.functions.items()}
        if all(before.get(gv.name_hint) is f for gv, f in rewritten.functions.items()):
            return mod
        return Sequential(_tidy_after(), "tidy")(rewritten)

    def __repr__(self) -> str:
        return f"EvalModeRewrites({self.target!r})" if self.target != "llvm" else "EvalModeRewrites()"


def bound_inference_passes(func_name: str = "main", target: str = "llvm") -> Sequential:
    """What a module whose weights are bound (BindParams) goes through before the zero pipeline,
    in the one place `tvms run --bind` and the benchmarks take it from: bound weights mean
    inference, so every batch norm of ``func_name`` is rewritten (`inference_passes`)."""
    return Sequential(inference_passes(func_name, target), "bound inference")


def default_pipeline(target: str = "llvm") -> Sequential:
    """What ``tvms.compile`` runs on a module with high-level ops: the rewrites that keep its
    meaning (`EvalModeRewrites`: batch norms marked ``training=False``, as an imported
    ``model.eval()`` writes them), then the zero pipeline (``target``: what it compiles for).

    Why not zero alone: legalized as it is, a batch norm is one multi-output kernel of its own
    after every convolution, and its tuple keeps the ReLU after it from fusing too. resnet18
    imported with ``from_exported_program`` compiled to 61 kernel launches through zero, and to
    23 (one per convolution, its batch norm, residual add and ReLU in the same kernel) through
    this pipeline. Zero stays TVM's, so its printout matches TVM's. The CPU's NHWC layout is not
    here: it is a choice `bound_inference_passes` makes for bound weights.

    For a CUDA ``target`` RewriteCUDAGraph comes last, as in TVM's CUDA pipeline: the functions
    that only launch kernels are marked to replay them as one CUDA graph (unless the PassContext
    turns ``relax.backend.use_cuda_graph`` off; the build marks them too, for a module compiled
    without a pipeline); before zero, SplitAttention writes ``R.nn.attention`` out as matmuls
    and a softmax, which the GPU schedules have rules for (`_is_cuda`), and
    `ChannelsLastForTensorCores` computes the convolutions in NHWC where they run on the
    tensor cores."""
    passes = [EvalModeRewrites(str(target)), *zero_passes()]
    if _is_cuda(target):
        from .rewrite_cuda_graph import RewriteCUDAGraph
        from .split_attention import SplitAttention

        passes = [passes[0], SplitAttention(), ChannelsLastForTensorCores(str(target)), *passes[1:],
                  RewriteCUDAGraph()]
    return Sequential(passes, "default")


def channels_last_for_cpu(mod: ir.IRModule) -> ir.IRModule:
    """ConvertLayout to NHWC (``HWIO`` kernels) when the module's 2-D convolutions are all NCHW,
    dense (one group) or depthwise (a filter per channel), with constant weights (their
    transposes fold at compile time; a weight passed in would be transposed on every call);
    else the module as it is.

    Why: the CPU schedule vectorizes a convolution over its output channels, contiguous in NHWC.
    resnet18's 3x3 convolutions took 0.83-0.93x their NCHW time, its first 7x7 one 0.85x; in
    mobilenet_v2 the depthwise convolutions (`topi.nn.depthwise_conv2d_nhwc`, their padding
    guards partitioned away from the interior by `compiler.loop_partition`) took 0.4-0.78x,
    the 1x1 ones 0.8-0.95x, the whole model 0.79x. Other grouped convolutions stay in NCHW
    (they have no NHWC kernel here: each would be transposed in and out)."""
    from tvmscript.ir import relax

    convs = _conv2d_calls(mod)
    if not convs or not all(isinstance(c.args[1], relax.Constant) and c.attrs["data_layout"] == "NCHW"
                            and _dense_or_depthwise(c) for c in convs):
        return mod
    return _to_nhwc(mod)


class ChannelsLastForTensorCores:
    """``IRModule -> IRModule``: for a CUDA ``target``, ConvertLayout to NHWC (``HWIO``
    kernels) when every 2-D convolution of the module runs on the tensor cores (float16 or
    bfloat16 data, or float32 where the target allows TF32: ``cuda -allow_tf32=1``), is NCHW and
    dense (one group), with constant weights (their transposes fold at compile time; a weight
    cast by ToMixedPrecision, ``R.astype`` of a constant, counts); else the module as it is.

    Why: the tensor-core schedule copies the convolution's input into shared memory 16 bytes
    at a time along K, the reduction over channels and kernel window (`dlight.gpu.MatmulTensorCore`,
    an implicit GEMM). In NCHW the channels are H x W apart and K is contiguous for at most a
    kernel row, so each thread copies one half at a time; in NHWC the channels are contiguous.
    Estimated on an H200 (benchmarks/cuda_models.py, roofline): resnet18 at batch 32 in mixed
    precision 3.55 -> 0.68 ms, with TF32 3.75 -> 1.82 ms. fp32 convolutions on the CUDA cores
    stay NCHW, which their schedules read along the pixels (resnet18 at batch 32: 4.48 ms;
    4.55 ms in NHWC)."""

    def __init__(self, target: str = "cuda") -> None:
        self.target = target

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        if not _is_cuda(self.target):
            return mod
        from tvmscript.target import Target

        convs = _conv2d_calls(mod)
        tf32 = bool(Target(str(self.target)).attrs.get("allow_tf32", False))
        dtypes = ("float16", "bfloat16") + (("float32",) if tf32 else ())
        bound = _bound_values(mod)
        if not convs or not all(c.attrs["data_layout"] == "NCHW" and c.attrs["groups"] == 1
                                and getattr(c.args[0].struct_info, "dtype", None) in dtypes
                                and _constant_weight(c, bound) for c in convs):
            return mod
        return _to_nhwc(mod)

    def __repr__(self) -> str:
        return f"ChannelsLastForTensorCores({self.target!r})"


def _conv2d_calls(mod: ir.IRModule) -> list:
    from tvmscript.ir import relax

    from ._common import op_name, walk_relax

    convs = []
    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            walk_relax(func, lambda n: convs.append(n) if op_name(n) == "relax.nn.conv2d" else None)
    return convs


def _to_nhwc(mod: ir.IRModule) -> ir.IRModule:
    from .convert_layout import ConvertLayout

    return ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})(mod)


def _bound_values(mod: ir.IRModule) -> dict:
    """Each variable bound in the blocks of the module's Relax functions -> its value."""
    from tvmscript.ir import relax

    bound = {}
    for func in mod.functions.values():
        if isinstance(func, relax.Function) and isinstance(func.body, relax.SeqExpr):
            for block in func.body.blocks:
                bound.update((b.var, getattr(b, "value", None)) for b in block.bindings)
    return bound


def _constant_weight(conv, bound: dict) -> bool:
    """Whether a conv2d call's kernel is a constant, or a variable bound (``bound``: variable ->
    value) to ``R.astype`` of one (what ToMixedPrecision writes for a bound weight)."""
    from tvmscript.ir import relax

    from ._common import op_name

    w = conv.args[1]
    if isinstance(w, relax.Constant):
        return True
    v = bound.get(w)
    return op_name(v) == "relax.astype" and isinstance(v.args[0], relax.Constant)


def _dense_or_depthwise(conv) -> bool:
    """Whether a conv2d call has one group, or one filter per channel (OIHW weight ``(C, 1,
    kh, kw)`` over ``C`` channels)."""
    groups = conv.attrs["groups"]
    if groups == 1:
        return True
    shape = conv.args[1].data.shape
    return conv.attrs["kernel_layout"] == "OIHW" and shape[0] == groups and shape[1] == 1


_PIPELINES = {"zero": lambda target: zero_pipeline(), "default": default_pipeline}


def get_pipeline(name: str = "zero", target: str = "llvm") -> Sequential:
    """TVM's ``relax.get_pipeline(name)``: "zero", and "default" (what ``tvms.compile`` runs:
    `default_pipeline` for ``target``)."""
    if name not in _PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; known: {', '.join(sorted(_PIPELINES))}")
    return _PIPELINES[name](target)
