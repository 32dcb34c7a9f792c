"""Names after LegalizeOps and fusion follow TVM's (issue 11, fidelity): a schedule or a test
written against TVM's output must find the same blocks, buffers and variables in ours.

The expected texts are TVM 0.27's printouts of the same pipeline (LegalizeOps,
AnnotateTIROpPattern, FuseOps, FuseTIR), written in the classic dialect tvms prints
(``T.block`` for ``T.sblock``, ``out_sinfo=`` for ``out_ty=``).
"""

from __future__ import annotations

import numpy as np

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform.fuse_tir import _fresh_block_name, _intermediate_name

HEADER = "# from tvm.script import ir as I\n# from tvm.script import relax as R\n\n"


def fuse(text: str):
    mod = tvms.parse(HEADER + text)
    mod = relax.transform.LegalizeOps()(mod)
    mod = relax.transform.AnnotateTIROpPattern()(mod)
    mod = relax.transform.FuseOps()(mod)
    return relax.transform.FuseTIR()(mod)


CHAIN = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            a = R.nn.relu(x)
            b = R.exp(a)
            c = R.nn.relu(b)
            d = R.nn.softmax(c)
            R.output(d)
        return d
'''

# TVM 0.27: three blocks named "compute" become compute, compute1, compute2; their outputs
# compute_intermediate, compute_intermediate_1, and (the parameter) compute_intermediate_1_2.
FUSED_CHAIN = '''    @T.prim_func(private=True)
    def fused_relu_tir_exp_relu(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), compute_intermediate_1_2: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        compute_intermediate = T.alloc_buffer((T.int64(2), T.int64(3)))
        compute_intermediate_1 = T.alloc_buffer((T.int64(2), T.int64(3)))
        for i0, i1 in T.grid(T.int64(2), T.int64(3)):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                T.reads(x[v_i0, v_i1])
                T.writes(compute_intermediate[v_i0, v_i1])
                compute_intermediate[v_i0, v_i1] = T.max(x[v_i0, v_i1], T.float32(0.0))
        for i0, i1 in T.grid(T.int64(2), T.int64(3)):
            with T.block("compute1"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                T.reads(compute_intermediate[v_i0, v_i1])
                T.writes(compute_intermediate_1[v_i0, v_i1])
                compute_intermediate_1[v_i0, v_i1] = T.exp(compute_intermediate[v_i0, v_i1])
        for i0, i1 in T.grid(T.int64(2), T.int64(3)):
            with T.block("compute2"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                T.reads(compute_intermediate_1[v_i0, v_i1])
                T.writes(compute_intermediate_1_2[v_i0, v_i1])
                compute_intermediate_1_2[v_i0, v_i1] = T.max(compute_intermediate_1[v_i0, v_i1], T.float32(0.0))
'''


def test_fused_blocks_and_intermediates_are_named_as_tvm_names_them():
    printed = fuse(CHAIN).script()
    assert FUSED_CHAIN in printed, printed


def test_fused_chain_still_computes_the_chain():
    mod = fuse(CHAIN)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype("float32")
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    e = np.exp(np.maximum(np.exp(np.maximum(x, 0)), 0))
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_fused_calls_are_bound_to_lv_lv1_lv2():
    mod = fuse('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.nn.relu(a)
            c = R.sum(b, axis=[1])
            e = R.exp(c)
            f = R.nn.relu(e)
            g = R.nn.softmax(f)
            h = R.exp(g)
            i = R.nn.relu(h)
            j = R.sum(i)
            R.output(j)
        return j
''')
    main = mod.script().split("def main")[1]
    assert "            lv = R.call_tir(cls.fused_tir_exp_relu_sum, (x,)" in main
    assert "            lv1 = R.call_tir(cls.fused_tir_exp1_relu1, (lv,)" in main
    assert "            lv2 = R.call_tir(cls.fused_softmax_tir_exp1_relu1, (lv1,)" in main
    # An op left alone keeps its own binding's name.
    assert "            j = R.call_tir(cls.sum1, (lv2,)" in main


def test_groups_that_fuse_alike_share_one_prim_func():
    # TVM's output: one fused_tir_exp_relu, called from both functions (lv, then lv1: the
    # names count over the module).
    mod = fuse('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.nn.relu(a)
            c = R.nn.softmax(b)
            R.output(c)
        return c

    @R.function
    def second(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.nn.relu(a)
            c = R.nn.softmax(b)
            R.output(c)
        return c
''')
    names = sorted(gv.name_hint for gv in mod.functions)
    assert names == ["fused_tir_exp_relu", "main", "second", "softmax"], names
    printed = mod.script()
    assert printed.count("= R.call_tir(cls.fused_tir_exp_relu, (x,)") == 2
    bound = sorted(ln.split(" = ")[0].strip() for ln in printed.splitlines()
                   if "R.call_tir(cls.fused_tir_exp_relu," in ln)
    assert bound == ["lv", "lv1"], bound


def test_block_names_raise_their_trailing_number():
    taken: set = set()
    got = [_fresh_block_name(n, taken) for n in ["compute", "compute", "compute", "conv2", "conv2", "compute1"]]
    assert got == ["compute", "compute1", "compute2", "conv2", "conv3", "compute3"]


def test_intermediate_names_grow_their_suffix():
    class Buf:
        def __init__(self, name):
            self.name = name

    assert _intermediate_name("T_add", []) == "T_add_intermediate"
    allocated = [Buf("T_add_intermediate")]
    assert _intermediate_name("T_add", allocated) == "T_add_intermediate_1"
    allocated.append(Buf("T_add_intermediate_1"))
    assert _intermediate_name("T_add", allocated) == "T_add_intermediate_1_2"


def test_main_prints_last_and_the_header_whenever_the_module_does():
    # Seed 000 shows LegalizeOps output without the header; TVM's printer writes it, with the
    # prim_funcs first, then the other Relax functions, then main.
    mod = tvms.parse(HEADER + '''@I.ir_module
class Module:
    @R.function
    def zeta(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.exp(x)
        return y

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        y = Module.zeta(x)
        return y
''')
    printed = relax.transform.LegalizeOps()(mod).script()
    assert printed.startswith("# from tvm.script import ir as I\n# from tvm.script import tir as T\n"
                              "# from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n"
                              "    @T.prim_func(private=True)\n    def tir_exp(")
    assert printed.index("def tir_exp(") < printed.index("def zeta(") < printed.index("def main(")
