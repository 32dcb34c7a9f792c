"""CanonicalizeBindings on the cases of TVM's test_transform_canonicalize_bindings.py (the
specification): each result equals the module TVM expects; the decomposed batch norm's tuple is
seen through, with the numbers unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.transform import CanonicalizeBindings, DecomposeOpsForInference, get_pipeline

HEADER = "@I.ir_module\nclass Module:\n"


def module(body: str):
    return tvms.parse(HEADER + body)


def check(before: str, expected: str) -> None:
    """Structurally equal, as TVM's test checks (the parser names an expression it binds for
    ``return`` afresh, so names may differ); the printed modules are shown when not."""
    after, want = CanonicalizeBindings()(module(before)), module(expected)
    assert tvms.ir.structural_equal(after["main"], want["main"]), after.script() + "\n!=\n" + want.script()


CASES = {
    "chain_of_assignments": ('''
    @R.function
    def main(x: R.Tensor):
        y = x
        z = y
        q = z
        p = q
        o = p
        return o
''', '''
    @R.function
    def main(x: R.Tensor):
        return x
'''),
    "dataflow_block": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.const(1)
            z = y
            o = z
            p = o
            m = p
            n = m
            R.output(n)
        return n
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            n = R.const(1)
            R.output(n)
        return n
'''),
    "assign_to_output_in_dataflow_block": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = x
            z = y
            o = z
            p = o
            m = p
            n = m
            R.output(n)
        return n
''', '''
    @R.function
    def main(x: R.Tensor):
        return x
'''),
    "ops": ('''
    @R.function
    def main(x: R.Tensor, y: R.Tensor):
        w = y
        q = x
        z = R.add(w, q)
        return R.add(q, z)
''', '''
    @R.function
    def main(x: R.Tensor, y: R.Tensor):
        z = R.add(y, x)
        return R.add(x, z)
'''),
    "match_cast_kept_when_it_refines": ('''
    @R.function
    def main(x: R.Tensor):
        q = x
        m, n = T.int64(), T.int64()
        z = R.match_cast(q, R.Tensor((m, n)))
        w = z
        return w
''', '''
    @R.function
    def main(x: R.Tensor):
        m, n = T.int64(), T.int64()
        z = R.match_cast(x, R.Tensor((m, n)))
        return z
'''),
    "same_shape_match_cast_removed": ('''
    @R.function
    def main(x: R.Tensor(("m", "n"), "float32")):
        m, n = T.int64(), T.int64()
        y = x
        z = R.match_cast(x, R.Tensor((m, n), "float32"))
        w = z
        q = R.add(w, y)
        return R.add(q, w)
''', '''
    @R.function
    def main(x: R.Tensor(("m", "n"), "float32")):
        q = R.add(x, x)
        return R.add(q, x)
'''),
    "change_shape": ('''
    @R.function
    def main(x: R.Tensor(ndim=2)):
        y = x
        o, p = T.int64(), T.int64()
        z = R.match_cast(x, R.Tensor((o, p)))
        w = z
        q = R.add(w, y)
        return R.add(q, w)
''', '''
    @R.function
    def main(x: R.Tensor(ndim=2)):
        o, p = T.int64(), T.int64()
        z = R.match_cast(x, R.Tensor((o, p)))
        q = R.add(z, x)
        return R.add(q, z)
'''),
    "unwrap_tuple": ('''
    @R.function
    def main(x: R.Tensor, y: R.Tensor):
        tuple_var = (x, y)
        w = tuple_var[0]
        q = tuple_var[1]
        z = R.add(w, q)
        return R.add(q, z)
''', '''
    @R.function
    def main(x: R.Tensor, y: R.Tensor):
        tuple_var = (x, y)
        z = R.add(x, y)
        return R.add(y, z)
'''),
    "fold_match_cast": ('''
    @R.function
    def main() -> R.Tensor((), "int32"):
        with R.dataflow():
            y = R.const(1)
            n = R.match_cast(y, R.Tensor((), "int32"))
            R.output(n)
        return n
''', '''
    @R.function
    def main() -> R.Tensor((), "int32"):
        with R.dataflow():
            n = R.const(1)
            R.output(n)
        return n
'''),
    "multiple_outputs": ('''
    @R.function
    def main():
        with R.dataflow():
            x = R.const(1)
            y = R.const(1)
            z = R.const(1)
            l = x
            m = y
            n = z
            R.output(l, m, n)
        return (l, m, n)
''', '''
    @R.function
    def main():
        with R.dataflow():
            l = R.const(1)
            m = R.const(1)
            n = R.const(1)
            R.output(l, m, n)
        return (l, m, n)
'''),
    "single_output_multiple_nondataflow": ('''
    @R.function
    def main():
        with R.dataflow():
            x = R.const(1)
            y = R.const(1)
            z = R.const(1)
            l = x
            m = y
            n = z
            R.output(l, m, n)
        return n
''', '''
    @R.function
    def main():
        with R.dataflow():
            l = R.const(1)
            m = R.const(1)
            n = R.const(1)
            R.output(n)
        return n
'''),
    "fold_const_to_output": ('''
    @R.function
    def main() -> R.Tensor((), "int32"):
        with R.dataflow():
            n = R.const(1)
            R.output(n)
        return n
''', '''
    @R.function
    def main() -> R.Tensor((), "int32"):
        with R.dataflow():
            n = R.const(1)
            R.output(n)
        return R.const(1)
'''),
    "var_to_dataflow_var_if_legal": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = R.add(y, R.const(1))
            R.output(y, z)
        return z
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = R.add(y, R.const(1))
            R.output(z)
        return z
'''),
    "update_dataflow_computations_if_var_replacement_occurs": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            lv1 = R.add(x, R.const(1))
            gv1 = lv1
            gv2 = R.add(lv1, R.const(1))
            R.output(gv1, gv2)
        return (gv1, gv2)
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            gv1 = R.add(x, R.const(1))
            gv2 = R.add(gv1, R.const(1))
            R.output(gv1, gv2)
        return (gv1, gv2)
'''),
    "replacement_after_usage": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            lv1 = R.add(x, R.const(1))
            gv2 = R.add(lv1, R.const(1))
            gv1 = lv1
            R.output(gv1, gv2)
        return (gv1, gv2)
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            gv1 = R.add(x, R.const(1))
            gv2 = R.add(gv1, R.const(1))
            R.output(gv1, gv2)
        return (gv1, gv2)
'''),
    "var_replaced_by_dataflow_var_if_used_only_in_block": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            lv1 = R.add(x, R.const(1))
            gv1 = lv1
            gv2 = R.add(lv1, R.const(1))
            R.output(gv1, gv2)
        return gv2
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            gv1 = R.add(x, R.const(1))
            gv2 = R.add(gv1, R.const(1))
            R.output(gv2)
        return gv2
'''),
    "var_to_dataflow_with_trivial_binding": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            gv1 = R.add(x, R.const(1))
            lv1 = gv1
            gv2 = R.add(lv1, R.const(1))
            R.output(gv1, gv2)
        return gv2
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            gv1 = R.add(x, R.const(1))
            gv2 = R.add(gv1, R.const(1))
            R.output(gv2)
        return gv2
'''),
    "trivial_binding_to_dataflow_var": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = y
            R.output(z)
        return z
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            R.output(y)
        return y
'''),
    "multiple_trivial_bindings_to_dataflow_var": ('''
    @R.function
    def main(w: R.Tensor):
        with R.dataflow():
            x = R.add(w, R.const(1))
            y = x
            z = x
            R.output(y, z)
        return (y, z)
''', '''
    @R.function
    def main(w: R.Tensor):
        with R.dataflow():
            x = R.add(w, R.const(1))
            R.output(x)
        return (x, x)
'''),
    "trivial_var_binding_inside_dataflow_block": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = y
            R.output(y, z)
        return z
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            R.output(y)
        return y
'''),
    "across_non_dataflow_tuple": ('''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = (y,)
            gv = R.add(z[0], R.const(1))
            R.output(z, gv)
        return gv
''', '''
    @R.function
    def main(x: R.Tensor):
        with R.dataflow():
            y = R.add(x, R.const(1))
            z = (y,)
            gv = R.add(y, R.const(1))
            R.output(gv)
        return gv
'''),
    "inside_branches": ('''
    @R.function
    def main(x: R.Tensor, y: R.Tensor) -> R.Tensor:
        with R.dataflow():
            z = R.add(x, y)
            R.output(z)
        if R.const(True):
            w = z
            v = R.multiply(w, w)
            q = v
        else:
            w = R.multiply(z, z)
            v = w
            q = R.add(v, v)
        return q
''', '''
    @R.function
    def main(x: R.Tensor, y: R.Tensor) -> R.Tensor:
        with R.dataflow():
            z = R.add(x, y)
            R.output(z)
        if R.const(True):
            q = R.multiply(z, z)
        else:
            w = R.multiply(z, z)
            q = R.add(w, w)
        return q
'''),
    "unwrap_tuple_of_constant": ('''
    @R.function
    def main():
        tup = (R.const(0, "int64"), R.const(1, "int64"))
        x = tup[0]
        y = tup[1]
        z = R.add(x, y)
        return z
''', '''
    @R.function
    def main():
        tup = (R.const(0, "int64"), R.const(1, "int64"))
        x = tup[0]
        y = tup[1]
        z = R.add(R.const(0, "int64"), R.const(1, "int64"))
        return z
'''),
    "trivial_binding_of_replaced_non_dataflow_var": ('''
    @R.function
    def main(param_tuple: R.Tuple([R.Tensor])):
        with R.dataflow():
            A = param_tuple[0]
            B = A
            C = R.add(A, B)
            R.output(A, B, C)
        return C
''', '''
    @R.function
    def main(param_tuple: R.Tuple([R.Tensor])):
        with R.dataflow():
            A = param_tuple[0]
            C = R.add(A, A)
            R.output(C)
        return C
'''),
    "tuple_round_trip": ('''
    @R.function
    def main(param_tuple: R.Tuple([R.Tensor, R.Tensor, R.Tensor])):
        with R.dataflow():
            A = param_tuple[0]
            B = param_tuple[1]
            C = param_tuple[2]
            output = (A, B, C)
            R.output(output)
        return output
''', '''
    @R.function
    def main(param_tuple: R.Tuple([R.Tensor, R.Tensor, R.Tensor])):
        with R.dataflow():
            A = param_tuple[0]
            B = param_tuple[1]
            C = param_tuple[2]
            R.output()
        return param_tuple
'''),
    "partial_tuple_round_trip_kept": ('''
    @R.function
    def main(param_tuple: R.Tuple([R.Tensor, R.Tensor, R.Tensor])):
        with R.dataflow():
            A = param_tuple[0]
            B = param_tuple[1]
            output = (A, B)
            R.output(output)
        return output
''', None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tvm_case(name):
    before, expected = CASES[name]
    check(before, expected if expected is not None else before)


VAR_USED_IN_DISTINCT_DF_BLOCKS = '''
    @R.function(pure=False)
    def main(x: R.Tensor, y: R.Tensor) -> R.Tensor:
        with R.dataflow():
            z = R.add(x, y)
            w = R.multiply(z, y)
            v = R.add(w, x)
            R.output(v)
        _ = R.print(format="Hi mom!")
        with R.dataflow():
            a = R.multiply(v, v)
            b = R.add(a, a)
            c = R.subtract(b, a)
            d = R.add(c, c)
            R.output(d)
        return d
'''


def test_var_used_in_a_later_dataflow_block_stays_an_output():
    check(VAR_USED_IN_DISTINCT_DF_BLOCKS, VAR_USED_IN_DISTINCT_DF_BLOCKS)


def test_unchanged_function_is_kept_and_pass_is_idempotent():
    mod = module(CASES["chain_of_assignments"][0])
    once = CanonicalizeBindings()(mod)
    assert CanonicalizeBindings()(once)["main"] is once["main"]
    assert mod.script() != once.script()  # the input is not changed


BATCH_NORM_RELU = '''
    @R.function
    def main(x: R.Tensor(("n", 4, 6, 6), "float32"), gamma: R.Tensor((4,), "float32"),
             beta: R.Tensor((4,), "float32"), mean: R.Tensor((4,), "float32"),
             var: R.Tensor((4,), "float32")):
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=1e-5)
            lv = bn[0]
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv
'''


def test_decomposed_batch_norm_field_read_directly():
    """The decomposition's tuple ``(out, mean, var)`` is read through ``bn[0]``: afterwards
    the ReLU reads ``out`` itself (what lets FuseOps fuse it), with the batch dim symbolic."""
    after = CanonicalizeBindings()(DecomposeOpsForInference()(module(BATCH_NORM_RELU)))
    text = after.script()
    assert "= bn[0]" not in text
    bindings = after["main"].body.blocks[0].bindings
    bn, relu = bindings[-2], bindings[-1]
    assert relu.value.args[0] is bn.value.fields[0] is bindings[-3].var


def test_decomposed_batch_norm_same_numbers():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 6, 6)).astype("float32")
    gamma, beta, mean = (rng.standard_normal(4).astype("float32") for _ in range(3))
    var = rng.uniform(0.5, 2, 4).astype("float32")
    mod = get_pipeline("zero")(CanonicalizeBindings()(DecomposeOpsForInference()(module(BATCH_NORM_RELU))))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    got = vm["main"](*(tvms.nd.array(a) for a in (x, gamma, beta, mean, var))).numpy()
    s = (gamma / np.sqrt(var + 1e-5))[None, :, None, None]
    expected = np.maximum((x - mean[None, :, None, None]) * s + beta[None, :, None, None], 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


INNER_FUNCTION = '''
    @R.function(pure=False)
    def main(x: R.Tensor, y: R.Tensor) -> R.Tensor:
        with R.dataflow():
            @R.function(pure=False)
            def inner_func(x: R.Tensor, y: R.Tensor) -> R.Tensor:
                with R.dataflow():
                    z = R.add(x, y)
                    w = R.multiply(x, z)
                    v = R.add(y, w)
                    R.output({inner_first})
                _ = R.print(format="oops")
                with R.dataflow():
                    a = R.multiply(v, v)
                    b = R.add(a, a)
                    c = R.multiply(a, b)
                    R.output({inner_second})
                return c

            z = R.add(x, y)
            w = R.multiply(z, z)
            v = R.divide(w, z)
            R.output({outer_first})
        q = inner_func(w, v)
        with R.dataflow():
            a = R.multiply(q, q)
            b = R.add(a, a)
            c = R.multiply(b, a)
            R.output({outer_second})
        return c
'''


def test_inner_function():
    """TVM's test_inner_function: outputs used only in their block become DataflowVars, in the
    nested function too; what the nested function reads from outside stays exposed."""
    before = INNER_FUNCTION.format(inner_first="z, w, v", inner_second="a, b, c",
                                   outer_first="inner_func, z, v, w", outer_second="a, b, c")
    expected = INNER_FUNCTION.format(inner_first="v", inner_second="c", outer_first="inner_func, v, w",
                                     outer_second="c")
    check(before, expected)
