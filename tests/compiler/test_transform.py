"""Relax passes (compiler/transform): the zero pipeline reproduces TVM's printed output on the
seed goldens, each pass is idempotent, the transformed module computes what the input did,
and the individual analyses (op patterns, dead code) give TVM's answers."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import ir, relax, tir
from tvmscript.compiler.transform import (AnnotateTIROpPattern, DeadCodeElimination, FoldConstant,
                                          FuseOps, FuseTIR, get_pipeline)

GOLDEN = pathlib.Path(__file__).parents[1] / "golden"
SEEDS = ["seed000", "seed001"]


def legalized(seed):
    return tvms.load(GOLDEN / seed / "legalized.tvms")


@pytest.mark.parametrize("seed", SEEDS)
def test_zero_pipeline_matches_golden(seed):
    mod = legalized(seed)
    before = mod.script()
    out = get_pipeline("zero")(mod)
    assert out.script() == (GOLDEN / seed / "zero_pipeline.tvms").read_text()
    assert mod.script() == before  # the input module is not changed


@pytest.mark.parametrize("seed", SEEDS)
def test_zero_pipeline_twice_fuses_nothing_more(seed):
    # A second run only tags the fused PrimFuncs with their pattern (as TVM's would).
    once = get_pipeline("zero")(legalized(seed))
    twice = get_pipeline("zero")(once)
    assert sorted(gv.name_hint for gv in twice.functions) == sorted(gv.name_hint for gv in once.functions)
    ir.assert_structural_equal(twice["main"], once["main"])
    assert twice["fused_matmul_add_relu"].attrs["op_pattern"] == 4


def _stages(seed):
    mod = legalized(seed)
    mods = {}
    for p in (AnnotateTIROpPattern(), FoldConstant(), FuseOps(), FuseTIR(), DeadCodeElimination()):
        mods[type(p).__name__] = (p, mod)
        mod = p(mod)
    return mods


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
                                  "DeadCodeElimination"])
def test_each_pass_is_idempotent(seed, name):
    p, mod = _stages(seed)[name]
    once = p(mod)
    twice = p(once)
    assert sorted(gv.name_hint for gv in once.functions) == sorted(gv.name_hint for gv in twice.functions)
    for gv, func in once.functions.items():
        ir.assert_structural_equal(twice[gv.name_hint], func)
    assert twice.script() == once.script()


@pytest.mark.parametrize("seed", SEEDS)
def test_op_patterns_of_legalized_functions(seed):
    mod = AnnotateTIROpPattern()(legalized(seed))
    got = {gv.name_hint: f.attrs.get("op_pattern") for gv, f in mod.functions.items()
           if isinstance(f, tir.PrimFunc)}
    # the bias adds read one operand as the output is indexed: elementwise, as TVM finds them
    assert got == {"transpose": 2, "transpose1": 2, "matmul": 4, "matmul1": 4,
                   "add": 0, "add1": 0, "relu": 0}


def test_op_pattern_reduction_and_elementwise():
    src = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def rsum(A: T.Buffer((T.int64(4), T.int64(8)), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i, k in T.grid(T.int64(4), T.int64(8)):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0.0)
                B[vi] = B[vi] + A[vi, vk]

    @T.prim_func(private=True)
    def ewise(A: T.Buffer((T.int64(4), T.int64(8)), "float32"), B: T.Buffer((T.int64(4), T.int64(8)), "float32")):
        for i, j in T.grid(T.int64(4), T.int64(8)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])
'''
    mod = AnnotateTIROpPattern()(tvms.parse(src))
    assert mod["rsum"].attrs["op_pattern"] == 3
    assert mod["ewise"].attrs["op_pattern"] == 0


SCAN_SRC = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def scan(A: T.Buffer((T.int64(4), T.int64(8)), "float32"), B: T.Buffer((T.int64(4), T.int64(8)), "float32")):
        for i, j in T.grid(T.int64(4), T.int64(8)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                vj = T.axis.KIND(T.int64(8), j)
                B[vi, vj] = T.if_then_else(vj == T.int64(0), A[vi, vj], B[vi, vj - T.int64(1)] + A[vi, vj])
'''


@pytest.mark.parametrize("kind, pattern", [("spatial", 2), ("scan", 8), ("opaque", 8)])
def test_op_pattern_scan_and_opaque_iterators_are_opaque(kind, pattern):
    """A block whose instances run in order (a scan or opaque iterator) is kOpaque, though its
    loads alone look injective (``B[vi, vj - 1]`` uses only the store's variables): FuseOps
    must keep a prefix sum to itself. The same block with only spatial iterators shows what the
    loads give."""
    mod = AnnotateTIROpPattern()(tvms.parse(SCAN_SRC.replace("KIND", kind)))
    assert mod["scan"].attrs["op_pattern"] == pattern


def test_legalized_cumsum_is_opaque_by_analysis():
    """topi.scan's PrimFunc carries no pattern of its own; the analysis finds it opaque."""
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.cumsum(x, axis=1)))
    legal = tvms.relax.transform.LegalizeOps()(bb.get())
    assert "op_pattern" not in legal["cumsum"].attrs
    assert AnnotateTIROpPattern()(legal)["cumsum"].attrs["op_pattern"] == 8


def _rand_inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([d.value for d in p.struct_info.shape]).astype(p.struct_info.dtype)
            for p in func.params]


def _run(mod, inputs):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return vm["main"](*inputs).numpy()


@pytest.mark.parametrize("seed", SEEDS)
def test_pipeline_preserves_results(seed):
    mod = legalized(seed)
    out = get_pipeline("zero")(mod)
    inputs = _rand_inputs(mod["main"], seed=7)
    np.testing.assert_allclose(_run(out, inputs), _run(mod, inputs), rtol=1e-4, atol=1e-4)


DCE_SRC = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def relu(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                B[vi] = T.max(A[vi], T.float32(0.0))

    @T.prim_func(private=True)
    def neg(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                B[vi] = T.float32(0.0) - A[vi]

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.neg, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
            gv = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
            R.output(gv)
        return gv
'''


def test_dce_removes_unused_binding_and_prim_func():
    mod = tvms.parse(DCE_SRC)
    out = DeadCodeElimination()(mod)
    assert "neg" not in out and "relu" in out and "main" in out
    bindings = out["main"].body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == ["gv"]
    assert "neg" in mod  # input unchanged
    again = DeadCodeElimination()(out)
    assert again.script() == out.script()


def test_fold_constant_runs_prim_funcs_on_constants():
    mod = tvms.parse(DCE_SRC)
    main = mod["main"]
    data = np.array([1.0, -2.0, 3.0, -4.0], dtype="float32")
    const = relax.Constant(data, relax.tensor_sinfo([4], "float32"))
    b0, b1 = main.body.blocks[0].bindings
    call = b1.value
    folded_call = relax.Call(call.op, [call.args[0], relax.Tuple([const])], call.attrs, call.sinfo_args,
                             call.struct_info)
    blk = main.body.blocks[0]
    new_main = relax.Function(main.params, relax.SeqExpr(
        [relax.DataflowBlock([b0, relax.VarBinding(b1.var, folded_call)], outputs=blk.outputs)], main.body.body),
        main.ret_struct_info, dict(main.attrs), main.is_pure, main.private, main.struct_info)
    mod2 = mod.copy()
    mod2["main"] = new_main
    out = FoldConstant()(mod2)
    value = out["main"].body.blocks[0].bindings[1].value
    assert isinstance(value, relax.Constant)
    np.testing.assert_allclose(value.data, np.maximum(data, 0))
    # the first binding's argument is a parameter: not folded
    assert not isinstance(out["main"].body.blocks[0].bindings[0].value, relax.Constant)
    assert FoldConstant()(out)["main"].body.blocks[0].bindings[1].value is value
    # without constants the pass is the identity
    assert FoldConstant()(mod)["main"] is mod["main"]


def test_fuse_ops_groups_as_tvm():
    mod = FuseOps()(FoldConstant()(AnnotateTIROpPattern()(legalized("seed000"))))
    prims = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, relax.Function) and f.attrs.get("Primitive")}
    assert sorted(prims) == ["fused_matmul1_add1", "fused_matmul_add_relu"]
    calls = [b.value.args[0].name_hint for b in prims["fused_matmul_add_relu"].body.blocks[0].bindings]
    assert calls == ["matmul", "add", "relu"]
