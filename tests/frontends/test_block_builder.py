"""relax.BlockBuilder and relax.op (compiler/block_builder.py, tvmscript/ir/op/api.py): seed 002's
BlockBuilder example (5.3.2-5.3.3) and the high-level ops of 5.6."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.block_builder import BlockBuilder, BlockBuilderError
from tvmscript.ir.op import api as op


def tensor(shape, dtype="float32"):
    return relax.tensor_sinfo(list(shape), dtype)


def dims(sinfo):
    return [d.value for d in sinfo.shape]


def _te():
    try:
        from tvmscript.compiler import te
    except ImportError:  # pragma: no cover - TE is written in parallel
        pytest.skip("compiler/te.py is not there yet")
    return te


def te_matmul(A, B):
    te = _te()
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A):
    te = _te()
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def seed_module():
    """Seed 002 5.3.2, with the older ``relax.Var(name, shape, DynTensorType)`` form."""
    A = op.make_var("A", (128, 128), op.DynTensorType(2, "float32"))
    B = op.make_var("B", (128, 128), op.DynTensorType(2, "float32"))
    bb = BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)
            D = bb.emit_te(te_relu, C)
            R = bb.emit_output(D)
        bb.emit_func_output(R, params=[A, B])
    return bb.get(), (A, B, C, D, R)


# ----------------------------------------------------------------------------- seed 002 5.3


def test_seed_emit_te_module_structure():
    _te()
    mod, (A, B, C, D, R) = seed_module()
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == ["main", "te_matmul", "te_relu"]
    assert isinstance(mod["te_matmul"], tir.PrimFunc) and isinstance(mod["te_relu"], tir.PrimFunc)
    # As in TVM, emitted PrimFuncs have no global symbol: they are private to the module.
    assert mod["te_matmul"].private and "global_symbol" not in mod["te_matmul"].attrs
    # C and D are DataflowVars (5.3.3), which are relax.Vars too; R is a plain Var.
    assert type(C) is relax.DataflowVar and isinstance(C, relax.Var)
    assert type(R) is relax.Var
    assert (C.name_hint, D.name_hint, R.name_hint) == ("lv", "lv1", "gv")

    main = mod["main"]
    assert main.params == [A, B] and main.attrs["global_symbol"] == "main"
    assert dims(A.struct_info) == [128, 128] and A.struct_info.dtype == "float32"
    (block,) = main.body.blocks
    assert isinstance(block, relax.DataflowBlock) and block.outputs == [R]
    b0, b1, b2 = block.bindings
    assert b0.value.op.name == "relax.call_tir" and b0.value.args[0] is mod.get_global_var("te_matmul")
    assert b0.value.args[1].fields == [A, B]
    assert b1.value.args[0] is mod.get_global_var("te_relu") and b1.value.args[1].fields == [C]
    assert b2.value is D
    for b in (b0, b1, b2):
        assert dims(b.var.struct_info) == [128, 128] and b.var.struct_info.dtype == "float32"
    assert main.body.body is R and dims(main.ret_struct_info) == [128, 128]

    text = mod.script()
    assert 'def main(A: R.Tensor((128, 128), dtype="float32"), B: R.Tensor((128, 128), dtype="float32")) -> R.Tensor((128, 128), dtype="float32"):' in text
    assert 'lv = R.call_tir(cls.te_matmul, (A, B), out_sinfo=R.Tensor((128, 128), dtype="float32"))' in text
    assert 'lv1 = R.call_tir(cls.te_relu, (lv,), out_sinfo=R.Tensor((128, 128), dtype="float32"))' in text
    assert 'gv: R.Tensor((128, 128), dtype="float32") = lv1' in text
    # Placeholders are named after the Relax variables they stand for, with Relax's int64
    # dims, as TVM does today.
    assert ('@T.prim_func(private=True)\n    def te_matmul(A: T.Buffer((T.int64(128), T.int64(128)), "float32"), '
            'B: T.Buffer((T.int64(128), T.int64(128)), "float32"), matmul:') in text
    assert 'def te_relu(lv: T.Buffer((T.int64(128), T.int64(128)), "float32"), relu:' in text
    # What it prints parses back to the same module.
    assert tvms.ir.structural_equal(tvms.parse(text), mod)


def test_seed_emit_te_runs():
    _te()
    mod, _ = seed_module()
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype("float32")
    b = rng.standard_normal((128, 128)).astype("float32")
    out = vm["main"](tvms.nd.array(a), tvms.nd.array(b)).numpy()
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_emit_te_dedups_names_and_reuses_equal_prim_funcs():
    _te()
    x = op.make_var("x", tensor((4, 4)))
    y = op.make_var("y", tensor((4, 8)))
    bb = BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit_te(te_matmul, x, x)
            b = bb.emit_te(te_matmul, a, y)   # another shape: a second prim_func, te_matmul1
            c = bb.emit_te(te_relu, b)
            d = bb.emit_te(te_relu, b)        # the same prim_func again: reused
            out = bb.emit_output(op.add(c, d))
        bb.emit_func_output(out)
    mod = bb.get()
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == ["main", "te_matmul", "te_matmul1", "te_relu"]
    assert dims(b.struct_info) == [4, 8] and dims(out.struct_info) == [4, 8]
    # R.add stays a high-level op here (no legalization); the call_tirs reference the right kernels.
    calls = [bnd.value for bnd in mod["main"].body.blocks[0].bindings[:4]]
    assert [c.args[0].name_hint for c in calls] == ["te_matmul", "te_matmul1", "te_relu", "te_relu"]


# ----------------------------------------------------------------------------- relax.op


def test_op_add_broadcasts():
    x = op.make_var("x", tensor((4, 1, 3)))
    y = op.make_var("y", tensor((5, 3)))
    call = op.add(x, y)
    assert isinstance(call, relax.Call) and call.op.name == "relax.add" and call.args == [x, y]
    assert dims(call.struct_info) == [4, 5, 3] and call.struct_info.dtype == "float32"


def test_op_matmul_and_permute_dims():
    a = op.make_var("a", tensor((2, 8, 16)))
    b = op.make_var("b", tensor((16, 4)))
    mm = op.matmul(a, b)
    assert dims(mm.struct_info) == [2, 8, 4] and mm.attrs == {"out_dtype": "void"}
    mm16 = op.matmul(a, b, out_dtype="float16")
    assert mm16.struct_info.dtype == "float16"
    t = op.permute_dims(a)
    assert dims(t.struct_info) == [16, 8, 2] and t.attrs == {"axes": None}
    t = op.permute_dims(a, axes=[0, 2, 1])
    assert dims(t.struct_info) == [2, 16, 8] and t.attrs == {"axes": [0, 2, 1]}


def test_every_registered_op_has_a_function():
    from tvmscript.ir.op import all_ops

    for name in all_ops():
        short = name[len("relax."):]
        target = op
        for part in short.split("."):
            target = getattr(target, part)
        assert callable(target), short
    x = op.make_var("x", tensor((2, 3)))
    assert op.nn.relu(x).op.name == "relax.nn.relu"
    assert op.relu is op.nn.relu and op.dense is op.nn.dense  # seed 002 5.6's older spelling
    w = op.const(np.zeros((5, 3), "float32"))
    assert dims(op.nn.dense(x, w).struct_info) == [2, 5]


def test_invalid_op_calls_raise_value_error():
    a = op.make_var("a", tensor((2, 3)))
    b = op.make_var("b", tensor((4, 5)))
    with pytest.raises(ValueError, match="relax.op.matmul: reduction dimensions differ: 3"):
        op.matmul(a, b)
    with pytest.raises(ValueError, match="do not broadcast"):
        op.add(a, b)
    with pytest.raises(ValueError, match="relax.op.matmul: unknown dtype"):
        op.matmul(a, a, out_dtype="floaty")
    with pytest.raises(ValueError, match="not a permutation"):
        op.permute_dims(a, axes=[0, 0])
    with pytest.raises(TypeError):
        op.add(a)


def test_const():
    c = op.const(np.arange(6, dtype="float32").reshape(2, 3))
    assert isinstance(c, relax.Constant) and dims(c.struct_info) == [2, 3] and c.struct_info.dtype == "float32"
    assert op.const(1.5).data.dtype == np.float32 and op.const(1).data.dtype == np.int32
    assert op.const([1, 2], "float16").struct_info.dtype == "float16"
    assert op.const(np.ones(3), op.DynTensorType(1, "float32")).data.dtype == np.float32


def test_legacy_var_form():
    v = op.make_var("A", (128, 64), op.DynTensorType(2, "float32"))
    assert type(v) is relax.Var and dims(v.struct_info) == [128, 64] and v.struct_info.dtype == "float32"
    with pytest.raises(ValueError, match="rank"):
        op.make_var("A", (128, 64), op.DynTensorType(3, "float32"))
    v = op.make_var("x", relax.TensorStructInfo([2, 3], "float32"))  # Python ints become IntImm dims
    assert all(isinstance(d, tir.IntImm) for d in v.struct_info.shape)


# ----------------------------------------------------------------------------- the builder


def _high_level(params_at_function: bool):
    x = op.make_var("x", tensor((1, 784)))
    w = op.const(np.zeros((128, 784), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x] if params_at_function else None):
        with bb.dataflow():
            lv = bb.emit(op.nn.dense(x, w))
            lv1 = bb.emit(op.add(lv, op.const(np.zeros(128, "float32"))))
            lv2 = bb.emit(op.nn.relu(lv1))
            gv = bb.emit_output(lv2)
        if params_at_function:
            bb.emit_func_output(gv)
        else:
            bb.emit_func_output(gv, params=[x])
    return bb.get()


def test_params_at_function_or_at_output():
    m1, m2 = _high_level(True), _high_level(False)
    for mod in (m1, m2):
        main = mod["main"]
        assert [p.name_hint for p in main.params] == ["x"]
        names = [b.var.name_hint for b in main.body.blocks[0].bindings]
        assert names == ["lv", "lv1", "lv2", "gv"]
        assert all(dims(b.var.struct_info) == [1, 128] for b in main.body.blocks[0].bindings)
    assert m1.script() == m2.script()
    assert "lv2: R.Tensor((1, 128), dtype=\"float32\") = R.nn.relu(lv1)" in m1.script()


def test_emit_outside_dataflow_and_output_names():
    x = op.make_var("x", tensor((3,)))
    bb = BlockBuilder()
    with bb.function("f", [x], private=True):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.add(a, x), name_hint="b")
        with bb.dataflow():
            c = bb.emit(op.multiply(b, b))
            g0 = bb.emit_output(c)
            g1 = bb.emit_output((g0, c))
        bb.emit_func_output(g1)
    f = bb.get()["f"]
    # TVM's names: gv outside dataflow blocks, lv inside, one gv count for emit and emit_output.
    assert type(a) is relax.Var and a.name_hint == "gv" and b.name_hint == "b"
    assert type(c) is relax.DataflowVar and c.name_hint == "lv"
    assert (g0.name_hint, g1.name_hint) == ("gv1", "gv2")
    assert isinstance(g1.struct_info, relax.TupleStructInfo) and len(g1.struct_info.fields) == 2
    assert [type(blk) for blk in f.body.blocks] == [relax.BindingBlock, relax.DataflowBlock]
    assert f.private and "global_symbol" not in f.attrs


def test_misuse_errors():
    x = op.make_var("x", tensor((3,)))
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="emit_output can only be called inside a bb.dataflow"):
        with bb.function("main", [x]):
            bb.emit_output(x)
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="already been called"):
        with bb.function("main", [x]):
            bb.emit_func_output(x)
            bb.emit_func_output(x)
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="emit_func_output must be called"):
        with bb.function("main", [x]):
            bb.emit(op.exp(x))
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="already given"):
        with bb.function("main", [x]):
            bb.emit_func_output(x, params=[x])
    bb = BlockBuilder()
    with pytest.raises(ValueError, match="do not broadcast"):
        with bb.function("main", [x]):
            bb.emit(relax.Call(relax.Op("relax.add"), [x, op.const(np.zeros(4, "float32"))]))
    assert "main" not in bb.get()


def test_normalize_infers_struct_info():
    x = op.make_var("x", tensor((2, 3)))
    bb = BlockBuilder()
    call = bb.normalize(relax.Call(relax.Op("relax.permute_dims"), [x], {}))
    assert dims(call.struct_info) == [3, 2] and call.attrs == {"axes": None}
    tup = bb.normalize(relax.Tuple([x, call]))
    assert isinstance(tup.struct_info, relax.TupleStructInfo)
    item = bb.normalize(relax.TupleGetItem(tup, 1))
    assert dims(item.struct_info) == [3, 2]


def test_add_func_and_call_of_module_function():
    x = op.make_var("x", tensor((3,)))
    bb = BlockBuilder()
    with bb.function("helper", [x]):
        bb.emit_func_output(bb.emit(op.exp(x)))
    y = op.make_var("y", tensor((3,)))
    with bb.function("main", [y]):
        gv = bb.get().get_global_var("helper")
        r = bb.emit(relax.Call(gv, [y]))
        bb.emit_func_output(r)
    mod = bb.get()
    assert dims(r.struct_info) == [3]
    assert dims(mod["main"].ret_struct_info) == [3]
    g = bb.add_func(mod["helper"], "helper")
    assert g.name_hint == "helper1"


def test_tvms_relax_hookup():
    """Once tvmscript/relax.py exposes them: relax.BlockBuilder, relax.op, relax.const."""
    if not hasattr(relax, "BlockBuilder"):
        pytest.skip("tvms.relax does not expose BlockBuilder yet")
    assert relax.BlockBuilder is BlockBuilder
    assert relax.op.add is op.add and relax.op.nn.relu is op.nn.relu
    assert isinstance(relax.const(1.0), relax.Constant)
    v = relax.Var("A", (128, 128), relax.DynTensorType(2, "float32"))
    assert dims(relax.struct_info_of(v)) == [128, 128]


@pytest.mark.parametrize("size", [7, 10])
def test_call_te_passes_unbound_sizes_as_tir_vars(size):
    """Sizes no input's shape binds (``n - 1`` of an arange, ``n // 2`` of a full) become scalar
    parameters of the prim_func and ``tir_vars=R.shape([n])`` of the call, as in TVM."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(relax.op.arange(0, n - 1, 1, dtype="float32"))
        f = bb.emit(relax.op.full((n // 2,), relax.const(3.0, "float32")))
        bb.emit_func_output(relax.Tuple([a, f]))
    legal = tvms.relax.transform.LegalizeOps()(bb.get())
    text = legal.script()
    assert "def arange(T_arange_handle: T.handle, n: T.int64)" in text
    assert "tir_vars=R.shape([n])" in text
    assert tvms.parse(text).script() == text
    vm = tvms.relax.VirtualMachine(tvms.compile(legal), tvms.cpu())
    got_a, got_f = vm["main"](np.zeros(size, "float32"))
    np.testing.assert_array_equal(got_a.numpy(), np.arange(size - 1, dtype="float32"))
    np.testing.assert_array_equal(got_f.numpy(), np.full(size // 2, 3.0, "float32"))


def test_returning_a_dataflow_variable_runs_as_in_tvm_and_check_names_it():
    """Seed 002's from_fx returns the dataflow variable instead of emit_output's: TVM 0.27's
    builder accepts it and the VM runs it; its well-formed check names the variable."""
    import numpy as np

    import tvmscript as tvms
    from tvmscript.compiler.well_formed import well_formed_errors

    x = op.make_var("x", tensor((1, 4)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.exp(x))
            bb.emit_output(lv)
        bb.emit_func_output(lv)
    mod = bb.get()
    (err,) = well_formed_errors(mod)
    assert "dataflow variable 'lv' is used outside its dataflow block" in err.message
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](tvms.nd.array(np.zeros((1, 4), "float32"))).numpy(), np.ones((1, 4)))


def test_a_tuple_item_operand_is_bound_first_as_tvm_binds_it():
    """TVM 0.27: ``gv = t[0]`` then ``gv1 = R.add(gv, x)``; the parser binds it the same way,
    so the built module prints and reads back as the same module."""
    import tvmscript as tvms
    from tvmscript.ir import structural_equal

    t = op.make_var("t", relax.TupleStructInfo([tensor((2,)), tensor((2,))]))
    x = op.make_var("x", tensor((2,)))
    bb = BlockBuilder()
    with bb.function("main", [t, x]):
        bb.emit_func_output(bb.emit(op.add(bb.normalize(relax.TupleGetItem(t, 0)), x)))
    mod = bb.get()
    text = mod.script()
    assert 'gv: R.Tensor((2,), dtype="float32") = t[0]' in text and "= R.add(gv, x)" in text
    assert structural_equal(mod, tvms.parse(text))
