"""TIR forms TVM 0.27 prints that tvms reads and prints back (issue 11): the immutable scalar
binding ``v: T.let[T.float32] = expr``, a scalar prim_func returning a value, a block's
``T.match_buffer`` over a buffer region, ``T.Ramp``/``T.Broadcast``, ``T.assume``,
``T.address_of``, ``T.continue_loop``/``T.break_loop``, asserts with an error kind
(``("ValueError", ["..."])``), ``T.attr`` statements and ``T.exp(x, dtype=...)``. Each program
round-trips: parse, print, re-parse, structurally equal, print again identical.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import structural_equal
from tvmscript.ir.tir_visitor import TIRVisitor


def _roundtrip(text: str):
    """Parse ``text``, print it, re-parse the printout: the two agree and print identically."""
    first = tvms.parse(text)
    printed = first.script()
    second = tvms.parse(printed)
    assert structural_equal(first, second), printed
    assert second.script() == printed
    return first, printed


LET_SCALE = '''
@T.prim_func
def scale(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32")):
    for i in range(6):
        t: T.let[T.float32] = A[i] * T.float32(2)
        B[i] = t + t
'''


def test_let_binding_round_trips():
    func, printed = _roundtrip(LET_SCALE)
    # Printed in the dtype-annotation spelling the reference printouts in tests/ use.
    assert "t: T.float32 = A[i] * T.float32(2" in printed
    # Same tree as the plain dtype annotation, the spelling tvms read before.
    assert structural_equal(func, tvms.parse(LET_SCALE.replace("T.let[T.float32]", "T.float32")))


def test_let_binding_is_a_letstmt_with_the_declared_dtype():
    func = tvms.parse(LET_SCALE.replace("T.let[T.float32] = A[i] * T.float32(2)", "T.let[T.int32] = i * 3")
                      .replace("B[i] = t + t", "B[i] = T.Cast(\"float32\", t + t)"))
    let = func.body.body
    assert isinstance(let, tir.LetStmt)
    assert let.var.dtype == "int32" and let.var.name == "t"
    _roundtrip(func.script())


def test_let_binding_computes():
    mod = tvms.IRModule({"scale": tvms.parse(LET_SCALE)})
    ex = tvms.compile(mod, "llvm")
    a = np.arange(6, dtype="float32")
    b = np.zeros(6, dtype="float32")
    ta, tb = tvms.nd.array(a), tvms.nd.array(b)
    ex["scale"](ta, tb)
    np.testing.assert_allclose(tb.numpy(), a * 4)


def test_let_binding_with_bad_dtype_is_a_clear_error():
    with pytest.raises(TVMScriptError, match="dtype"):
        tvms.parse(LET_SCALE.replace("T.let[T.float32]", "T.let[T.nosuch]"))


PRODUCT = '''
@T.prim_func
def product(M: T.int32, N: T.int32) -> T.int32:
    return M * N + 1
'''


def test_scalar_return_round_trips():
    func, printed = _roundtrip(PRODUCT)
    assert func.ret_type == "int32"
    assert "def product(M: T.int32, N: T.int32) -> T.int32:" in printed
    assert "return M * N + 1" in printed
    call = func.body.value
    assert isinstance(call, tir.Call) and call.op == "tir.ret" and call.dtype == "int32"


def test_scalar_return_is_cast_to_the_declared_dtype():
    func = tvms.parse(PRODUCT.replace("-> T.int32", "-> T.int64"))
    assert func.body.value.args[0].dtype == "int64"
    _roundtrip(func.script())


def test_return_without_annotation_keeps_the_value_as_it_is():
    # TVM reads `return M * N` in an unannotated prim_func and prints it back unannotated.
    text = PRODUCT.replace(" -> T.int32", "")
    func, printed = _roundtrip(text)
    assert func.ret_type is None
    assert " -> " not in printed and "    return M * N + 1" in printed


def test_return_none_annotation_means_no_value():
    text = '@T.prim_func\ndef f(A: T.Buffer((2,), "float32")) -> None:\n    A[0] = T.float32(1)\n'
    func = tvms.parse(text)
    assert func.ret_type is None
    _roundtrip(text)


MATCH_REGION = '''
@T.prim_func
def fill_rows(A: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("row"):
            vi = T.axis.spatial(4, i)
            T.reads()
            T.writes(A[vi, 0:8])
            R = T.match_buffer(A[vi, 0:8], (8,))
            for j in range(8):
                R[j] = T.Cast("float32", vi * 8 + j)
'''


def test_match_buffer_region_round_trips():
    func, printed = _roundtrip(MATCH_REGION)
    assert "R = T.match_buffer(A[vi, 0:8], (8,))" in printed
    block = func.body.block.body.body.block if isinstance(func.body, tir.BlockRealize) else func.body.body.block
    (match,) = block.match_buffers
    assert isinstance(match, tir.MatchBufferRegion)
    assert match.buffer.shape[0].value == 8 and match.source.buffer.name == "A"
    rng = match.source.region[1]
    assert rng.min.value == 0 and rng.extent.value == 8


def test_match_buffer_region_outside_a_block_is_a_clear_error():
    text = '@T.prim_func\ndef f(A: T.Buffer((4, 8), "float32")):\n    R = T.match_buffer(A[0, 0:8], (8,))\n    R[0] = T.float32(1)\n'
    with pytest.raises(TVMScriptError, match="only allowed inside a T.block"):
        tvms.parse(text)


def test_slice_in_an_index_names_the_region_forms():
    text = '@T.prim_func\ndef f(A: T.Buffer((4, 8), "float32")):\n    A[0, 0:8] = T.float32(1)\n'
    with pytest.raises(TVMScriptError, match="T.match_buffer"):
        tvms.parse(text)


def _one_stmt_func(stmt: str) -> str:
    return ('@T.prim_func\ndef f(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "float32")):\n'
            f"    {stmt}\n")


def test_ramp_and_broadcast_round_trip():
    func, printed = _roundtrip(_one_stmt_func("A[T.Ramp(0, 2, 4)] = T.Broadcast(7, 4)"))
    store = func.body
    ramp, bcast = store.indices[0], store.value
    assert isinstance(ramp, tir.Ramp) and ramp.dtype == "int32x4" and ramp.lanes == 4
    assert isinstance(bcast, tir.Broadcast) and bcast.dtype == "int32x4"
    assert "A[T.Ramp(0, 2, 4)] = T.Broadcast(7, 4)" in printed


def test_ramp_with_one_lane_is_a_clear_error():
    with pytest.raises(TVMScriptError, match="lanes must be an integer literal"):
        tvms.parse(_one_stmt_func("A[T.Ramp(0, 2, 1)] = T.Broadcast(7, 4)"))


def test_assume_round_trips():
    func, printed = _roundtrip(_one_stmt_func("T.assume(A[0] == 5)\n    A[0] = 10"))
    call = func.body.seq[0].value
    assert call.op == "tir.assume" and call.args[0].dtype == "bool"
    assert "    T.assume(A[0] == 5)\n    A[0] = 10\n" in printed


def test_address_of_round_trips():
    func, printed = _roundtrip(_one_stmt_func('T.evaluate(T.call_extern("int32", "use", T.address_of(B[2])))'))
    call = func.body.value.args[1]  # after the extern function name
    assert call.op == "tir.address_of" and call.dtype == "handle"
    assert "T.address_of(B[2])" in printed


def test_address_of_needs_a_buffer_element():
    with pytest.raises(TVMScriptError, match="takes a buffer element"):
        tvms.parse(_one_stmt_func('T.evaluate(T.call_extern("int32", "use", T.address_of(3)))'))


LOOP_CONTROL = '''
@T.prim_func
def count(In: T.Buffer((1,), "int32"), Out: T.Buffer((2,), "int32")):
    for i in range(100):
        if i % 7 == 0:
            Out[1] = Out[1] + 1
            T.continue_loop()
        Out[0] = Out[0] + 1
        if Out[0] >= In[0]:
            T.break_loop()
'''


def test_continue_and_break_round_trip():
    func, printed = _roundtrip(LOOP_CONTROL)
    assert "            T.continue_loop()\n" in printed and "            T.break_loop()\n" in printed
    ops = []

    def walk(s):
        if isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call):
            ops.append(s.value.op)
        for child in (getattr(s, "body", None), getattr(s, "then_case", None), *getattr(s, "seq", [])):
            if isinstance(child, tir.Stmt):
                walk(child)

    walk(func.body)
    assert ops == ["tir.continue_loop", "tir.break_loop"]


def test_break_outside_a_loop_is_a_clear_error():
    with pytest.raises(TVMScriptError, match=r"T.break_loop\(\) is only allowed inside a loop"):
        tvms.parse(_one_stmt_func("T.break_loop()"))


def test_assert_with_error_kind_and_parts_round_trips():
    text = ('@T.prim_func\ndef check(x: T.int32):\n'
            '    assert x > 0, ("ValueError", ["expected ", "a positive", " size"])\n')
    func, printed = _roundtrip(text)
    assert 'assert x > 0, ("ValueError", ["expected ", "a positive", " size"])' in printed
    a = func.body
    assert a.kind == "ValueError" and a.message.value == "expected a positive size"
    plain = tvms.parse(text.replace('("ValueError", ["expected ", "a positive", " size"])', '"expected a positive size"'))
    assert not structural_equal(func, plain)  # the kind is part of the program


def test_assert_kind_not_last_prints_as_scoped_assert():
    text = ('@T.prim_func\ndef check(x: T.int32, A: T.Buffer((1,), "int32")):\n'
            '    with T.Assert(x > 0, ("TypeError", ["bad"])):\n        A[0] = x\n    A[0] = A[0] + 1\n')
    func, printed = _roundtrip(text)
    assert 'with T.Assert(x > 0, ("TypeError", ["bad"])):' in printed


def test_assert_parts_must_be_strings():
    with pytest.raises(TVMScriptError, match="message parts must be a list of strings"):
        tvms.parse('@T.prim_func\ndef check(x: T.int32):\n    assert x > 0, ("ValueError", [x])\n')


def test_intrinsic_with_its_result_dtype_spelled():
    text = _one_stmt_func("B[0] = T.exp(B[1], dtype=\"float32\")")
    assert structural_equal(tvms.parse(text), tvms.parse(text.replace(', dtype="float32"', "")))
    with pytest.raises(TVMScriptError, match="gives float32, not float16"):
        tvms.parse(text.replace('dtype="float32"', 'dtype="float16"'))
    with pytest.raises(TVMScriptError, match="takes no keyword arguments but dtype"):
        tvms.parse(text.replace('dtype="float32"', 'fast=True'))


ATTR_SCOPE = '''
@T.prim_func
def zero(A: T.Buffer((4,), "float32")):
    with T.block("b"):
        T.reads()
        T.writes()
        T.attr({"pragma_scope": "seq"})
        for i in range(4):
            A[i] = T.float32(0)
'''


def test_attr_about_nothing_round_trips_in_tvm_spelling():
    func, printed = _roundtrip(ATTR_SCOPE)
    assert '        T.attr({"pragma_scope": "seq"})\n        for i in range(4):' in printed
    attr = func.body.block.body.block.body  # root block, then block "b"
    assert isinstance(attr, tir.AttrStmt) and attr.attr_key == "pragma_scope"
    assert tir.is_const_int(attr.node, 0) and attr.value.value == "seq"
    assert isinstance(attr.body, tir.For)
    # The three-argument spelling with node 0 is the same statement.
    explicit = ATTR_SCOPE.replace('T.attr({"pragma_scope": "seq"})', 'T.attr(0, "pragma_scope", "seq")')
    assert structural_equal(func, tvms.parse(explicit))


def test_attr_on_a_buffer_not_last_prints_as_with():
    text = ('@T.prim_func\ndef f(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "float32")):\n'
            '    with T.attr(A, "storage_alignment", 128):\n        A[0] = 1\n    A[1] = 2\n')
    func, printed = _roundtrip(text)
    assert '    with T.attr(A, "storage_alignment", 128):\n        A[0] = 1\n    A[1] = 2\n' in printed
    assert func.body.seq[0].node is func.buffer_map[func.params[0]]


def test_attr_with_a_non_string_key_is_a_clear_error():
    with pytest.raises(TVMScriptError, match="key must be a string"):
        tvms.parse(_one_stmt_func("T.attr(0, 1, 2)\n    A[0] = 1"))


PTX_OPS = '''
@T.prim_func
def f(A: T.Buffer((16, 16), "float16"), C: T.Buffer((16, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    tx = T.launch_thread("threadIdx.x", 32)
    A_shared = T.alloc_buffer((16, 16), "float16", scope="shared")
    A_warp = T.alloc_buffer((32, 8), "float16", scope="warp")
    B_warp = T.alloc_buffer((32, 4), "float16", scope="warp")
    C_warp = T.alloc_buffer((32, 4), "float32", scope="warp")
    T.ptx_cp_async("float16", A_shared.data, tx * 8, A.data, tx * 8, 16)
    T.ptx_commit_group()
    T.ptx_wait_group(0)
    T.ptx_ldmatrix("float16", T.bool(False), 4, ".b16", A_warp.data, tx * 8, T.tvm_access_ptr(T.type_annotation("float16"), A_shared.data, 0, 256, 1), tx % 16 * 16 + tx // 16 * 8)
    T.mma_fill("float32", 4, C_warp.data, tx * 4)
    T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32", A_warp.data, tx * 8, B_warp.data, tx * 4, C_warp.data, tx * 4, T.bool(False))
    T.mma_store("float32", 16, 8, T.tvm_access_ptr(T.type_annotation("float32"), C.data, 0, 128, 2), C_warp.data, tx * 4, 8)
'''


def test_ptx_tensor_core_builtins_round_trip_with_their_dtype_first():
    """TVM's PTX builtins (mma.sync, ldmatrix, cp.async and its groups, mma_fill/mma_store)
    print their dtype first, as TVM does; the older spelling with ``dtype=`` last reads the same."""
    func, printed = _roundtrip(PTX_OPS)
    for line in PTX_OPS.strip().splitlines()[-7:]:
        assert line in printed
    calls = []

    class Calls(TIRVisitor):
        def visit_Evaluate(self, node):
            calls.append(node.value)

    Calls().visit(func.body)
    assert [(c.op, c.dtype) for c in calls] == [
        ("tir.ptx_cp_async", "float16"), ("tir.ptx_commit_group", "handle"), ("tir.ptx_wait_group", "handle"),
        ("tir.ptx_ldmatrix", "float16"), ("tir.mma_fill", "float32"), ("tir.ptx_mma", "float32"),
        ("tir.mma_store", "float32")]
    assert calls[5].args[0].value == "m16n8k16"      # the shape, not taken for a dtype
    older = PTX_OPS.replace('T.ptx_ldmatrix("float16", T.bool(False)', "T.ptx_ldmatrix(T.bool(False)").replace(
        "tx % 16 * 16 + tx // 16 * 8)", 'tx % 16 * 16 + tx // 16 * 8, dtype="float16")')
    assert tvms.parse(older).script() == printed
