"""Relax forms of TVM's own tests: the parser normalizes as TVM's does, and reads the
spellings TVM reads (operators on tensors, expression dims, typed primitive values).

The expected texts of the normalization tests are what TVM 0.27 prints for the same
programs (checked with TVM itself), fresh variable names included.
"""

import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import structural_equal

T4 = 'R.Tensor((4,), dtype="float32")'


def body_lines(text: str) -> list[str]:
    """The lines of the function bodies, stripped, without the headers."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(("#", "@", "def ", "class ")):
            out.append(s)
    return out


def func(mod, name: str):
    """A function of a parsed module (a bare @R.function parses to the function itself)."""
    return mod if isinstance(mod, relax.Function) else mod[name]


def roundtrip(src: str):
    mod = tvms.parse(src)
    text = mod.script()
    again = tvms.parse(text)
    assert structural_equal(mod, again)
    assert again.script() == text
    return mod, text


def test_nested_call_becomes_two_bindings():
    src = '''
@R.function
def f(a: R.Tensor((4,), "float32"), c: R.Tensor((4,), "float32")):
    x = R.rsqrt(R.add(a, c))
    return R.add(x, c)
'''
    mod, text = roundtrip(src)
    assert body_lines(text) == [
        f"gv: {T4} = R.add(a, c)",
        f"x: {T4} = R.rsqrt(gv)",
        f"gv2: {T4} = R.add(x, c)",
        "return gv2",
    ]
    # The lifted call is a binding of its own, before its user.
    bindings = func(mod, "f").body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == ["gv", "x", "gv2"]
    assert bindings[1].value.args[0] is bindings[0].var


def test_names_in_and_out_of_dataflow_and_collisions():
    src = '''
@R.function
def f(a: R.Tensor((4,), "float32"), c: R.Tensor((4,), "float32")):
    lv = R.add(a, a)
    y = (R.add(lv, c), R.multiply(R.exp(lv), c))
    with R.dataflow():
        w = R.add(R.exp(a), R.exp(R.negative(a)))
        gv = R.add(R.abs(w), lv)
        R.output(gv)
    return R.add(R.exp(gv), c)
'''
    _, text = roundtrip(src)
    assert body_lines(text) == [
        f"lv: {T4} = R.add(a, a)",
        f"gv1: {T4} = R.add(lv, c)",
        f"gv2: {T4} = R.exp(lv)",
        f"gv3: {T4} = R.multiply(gv2, c)",
        f"y: R.Tuple({T4}, {T4}) = gv1, gv3",
        "with R.dataflow():",
        # the fresh "lv" of the dataflow block's supply meets the user's lv: printed lv_1
        f"lv_1: {T4} = R.exp(a)",
        f"lv1: {T4} = R.negative(a)",
        f"lv2: {T4} = R.exp(lv1)",
        f"w: {T4} = R.add(lv_1, lv2)",
        f"lv4: {T4} = R.abs(w)",
        f"gv: {T4} = R.add(lv4, lv)",
        "R.output(gv)",
        f"gv5: {T4} = R.exp(gv)",
        f"gv6: {T4} = R.add(gv5, c)",
        "return gv6",
    ]


def test_tuple_items_match_cast_and_returned_tuple():
    src = '''
@R.function
def f(a: R.Tensor((4,), "float32"), c: R.Tensor((4,), "float32")):
    z = R.match_cast(a, R.Tensor((4,), "float32"))
    t = (z, (R.exp(a), c))
    v = R.add(t[1][0], R.const(1.0, "float32"))
    gv4 = R.match_cast(R.exp(R.exp(v)), R.Tensor((4,), "float32"))
    return (R.exp(a), t[0])
'''
    _, text = roundtrip(src)
    pair = f"R.Tuple({T4}, {T4})"
    assert body_lines(text) == [
        f'z: {T4} = R.match_cast(a, {T4})',
        f"gv1: {T4} = R.exp(a)",
        f"t: R.Tuple({T4}, {pair}) = z, (gv1, c)",
        f"gv3: {pair} = t[1]",
        f"gv4: {T4} = gv3[0]",
        f'v: {T4} = R.add(gv4, R.const(1.0, "float32"))',
        # a match_cast keeps its value, whose own operands are normalized
        f"gv6: {T4} = R.exp(v)",
        f"gv4_1: {T4} = R.match_cast(R.exp(gv6), {T4})",
        f"gv8: {T4} = R.exp(a)",
        f"gv9: {T4} = t[0]",
        "return (gv8, gv9)",
    ]


def test_call_tir_arguments_and_if_branches_are_normalized():
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def add(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32"), c: T.Buffer((4,), "float32")):
        for i in range(4):
            c[i] = a[i] + b[i]

    @R.function
    def main(a: R.Tensor((4,), "float32"), c: R.Tensor((4,), "float32"), cond: R.Tensor((), "bool")):
        cls = Module
        z = R.call_tir(cls.add, (R.exp(a), c), out_sinfo=R.Tensor((4,), "float32"))
        if cond:
            x = R.add(R.exp(z), c)
        else:
            x = R.exp(R.exp(c))
        return x
'''
    mod, text = roundtrip(src)
    lines = body_lines(text)
    assert lines[lines.index("cls = Module") + 1:][:2] == [
        f"gv: {T4} = R.exp(a)",
        f"z = R.call_tir(cls.add, (gv, c), out_sinfo={T4})",
    ]
    # A branch's value is bound to x_then (x_else), numbered in the same supply as the rest.
    assert lines[lines.index("if cond:"):] == [
        "if cond:",
        f"gv2: {T4} = R.exp(z)",
        f"x_then: {T4} = R.add(gv2, c)",
        f"x: {T4} = x_then",
        "else:",
        f"gv4: {T4} = R.exp(c)",
        f"x_else: {T4} = R.exp(gv4)",
        f"x: {T4} = x_else",
        "return x",
    ]
    branch = func(mod, "main").body.blocks[0].bindings[-1].value.true_branch
    assert [b.var.name_hint for b in branch.blocks[0].bindings] == ["gv2", "x_then"]
    assert branch.body is branch.blocks[0].bindings[1].var


def test_non_void_call_statement_is_rejected():
    src = '''
@R.function
def f(x: R.Tensor((4,), "float32")):
    R.add(x, x)
    return x
'''
    with pytest.raises(TVMScriptError, match="Non-void relax expressions must be bound") as info:
        tvms.parse(src)
    assert info.value.span.line == 4


def test_operators_on_tensors_are_ops():
    src = '''
@R.function
def f(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
    a = -x + y * x
    b = x // y > x
    return (a, b)
'''
    _, text = roundtrip(src)
    t = 'R.Tensor((2, 3), dtype="float32")'
    assert body_lines(text)[:5] == [
        f"gv: {t} = R.negative(x)",
        f"gv1: {t} = R.multiply(y, x)",
        f"a: {t} = R.add(gv, gv1)",
        f"gv3: {t} = R.floor_divide(x, y)",
        'b: R.Tensor((2, 3), dtype="bool") = R.greater(gv3, x)',
    ]


def test_expression_dims_and_prim_conditions():
    src = '''
@R.function
def f(x: R.Tensor(("n",), "float32"), y: R.Tensor(("T.max(n, 20)",), "float32")) -> R.Tensor(("(n - n % -3) // 3",), "float32"):
    n = T.int64()
    if n % 16 == 0:
        out = R.call_pure_packed("fast", x, sinfo_args=R.Tensor(((n - n % -3) // 3,), "float32"))
    else:
        out = R.call_pure_packed("slow", x, sinfo_args=R.Tensor(((n - n % -3) // 3,), "float32"))
    return out
'''
    mod, text = roundtrip(src)
    f = func(mod, "f")
    assert 'R.Tensor(("T.max(n, 20)",)' in text
    cond = f.body.blocks[0].bindings[0].value.cond
    assert isinstance(cond, relax.PrimValue) and cond.value.dtype == "bool"


def test_error_inside_a_quoted_dim_points_at_the_string():
    src = '''
@R.function
def f(x: R.Tensor(("T.nosuch(n)",), "float32")):
    return x
'''
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert (info.value.span.line, info.value.span.col) == (3, 20)


def test_typed_primitive_bindings():
    src = '''
@R.function
def f(n: R.Prim("int64"), x: R.Tensor(("T.max(n, 20)",), "float32")):
    m = n + 1
    i: R.Prim("int32") = 2
    b: R.Prim("bool") = True
    k = R.prim_value(m)
    return (i, b, k)
'''
    mod, _ = roundtrip(src)
    bindings = func(mod, "f").body.blocks[0].bindings
    values = {b.var.name_hint: b.value for b in bindings}
    assert values["i"].value.dtype == "int32" and values["i"].value.value == 2
    assert values["b"].value.dtype == "bool" and values["b"].value.value == 1
    assert values["k"] is next(b.var for b in bindings if b.var.name_hint == "m")


def test_tensor_dtype_first_and_struct_info_of_a_variable():
    src = '''
@R.function
def f(x: R.Tensor("float32", ndim=2)):
    y = R.call_pure_packed("g", x, sinfo_args=[x.ty])
    return y
'''
    mod, text = roundtrip(src)
    assert 'x: R.Tensor(dtype="float32", ndim=2)' in text
    assert func(mod, "f").ret_struct_info.ndim == 2


def test_extern_func_values_and_callables():
    src = '''
@R.function
def f(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
    ext = R.ExternFunc("my_ext")
    y = R.call_dps_packed(ext, (x,), out_sinfo=R.Tensor((8,), "float32"))
    z = R.call_dps_packed(R.ExternFunc("my_ext"), (y,), out_sinfo=R.Tensor((8,), "float32"))
    return z
'''
    mod, text = roundtrip(src)
    lines = body_lines(text)
    assert lines[0] == 'ext: R.Callable = R.ExternFunc("my_ext")'
    assert lines[1] == 'y = R.call_dps_packed(ext, (x,), out_sinfo=R.Tensor((8,), dtype="float32"))'
    assert lines[2] == 'z = R.call_dps_packed("my_ext", (y,), out_sinfo=R.Tensor((8,), dtype="float32"))'
    assert isinstance(func(mod, "f").body.blocks[0].bindings[0].value, relax.ExternFunc)


def test_nested_function_is_a_closure():
    src = '''
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
    @R.function
    def inner(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        s = R.add(a, x)
        return s

    res = inner(y)
    return res
'''
    mod, text = roundtrip(src)
    t = 'R.Tensor((2, 3), dtype="float32")'
    # TVM heads a nested function with the import line and a blank line, and ends it with one.
    assert text.splitlines()[4:13] == [
        "    # from tvm.script import relax as R",
        "    ",
        "    @R.function",
        f"    def inner(a: {t}) -> {t}:",
        f"        s: {t} = R.add(a, x)",
        "        return s",
        "",
        f"    res: {t} = inner(y)",
        "    return res",
    ]
    f = func(mod, "main")
    closure = f.body.blocks[0].bindings[0]
    assert isinstance(closure.value, relax.Function)
    assert closure.value.body.blocks[0].bindings[0].value.args[1] is f.params[0]
    assert isinstance(closure.var.struct_info, relax.FuncStructInfo)


def test_callable_annotations():
    src = '''
@R.function
def f(g: R.Callable((R.Tensor((2,), "float32"),), R.Tensor((2,), "float32"), True), x: R.Tensor((2,), "float32")):
    y = g(x)
    return y
'''
    mod, text = roundtrip(src)
    assert 'g: R.Callable((R.Tensor((2,), dtype="float32"),), R.Tensor((2,), dtype="float32"), True)' in text
    assert func(mod, "f").ret_struct_info.shape[0].value == 2


def test_older_spellings_tuple_get_item_shape_expr_astype():
    src = '''
@R.function
def f(x: R.Tensor((2, 3), "float32")):
    t = (x, x)
    a = R.TupleGetItem(t, 1)
    b = a.astype("float16")
    c = R.reshape(x, R.ShapeExpr((3, 2)))
    return (b, c)
'''
    mod, text = roundtrip(src)
    lines = body_lines(text)
    assert lines[1] == 'a: R.Tensor((2, 3), dtype="float32") = t[1]'
    assert lines[2] == 'b: R.Tensor((2, 3), dtype="float16") = R.astype(a, dtype="float16")'
    assert lines[3] == 'c: R.Tensor((3, 2), dtype="float32") = R.reshape(x, R.shape([3, 2]))'


def test_return_inside_a_dataflow_block_ends_it():
    src = '''
@R.function
def f(a: R.Tensor((16,), "float16")):
    with R.dataflow():
        b = R.add(a, a)
        c = R.multiply(b, b)
        return c
'''
    _, text = roundtrip(src)
    assert body_lines(text)[-3:] == [
        'c: R.Tensor((16,), dtype="float16") = R.multiply(b, b)', "R.output(c)", "return c"]


def test_if_branches_run_for_their_effect():
    src = '''
@R.function(pure=False)
def f(x: R.Tensor((), "int32"), cond: R.Tensor((), "bool")):
    if cond:
        R.print(x, format="yes")
    else:
        R.print(x, format="no")
    return x
'''
    _, text = roundtrip(src)
    assert body_lines(text)[:6] == [
        "if cond:", 'R.print(x, format=R.str("yes"))', "_: R.Tuple = R.tuple()",
        "else:", 'R.print(x, format=R.str("no"))', "_: R.Tuple = R.tuple()",
    ]


def test_meta_var_and_typed_immediates():
    src = '''
@R.function
def f(q: R.Tensor((1, 4, 2, 8), "float32")):
    scale = I.meta_var(T.FloatImm("float32", 0.25))
    gv = R.nn.attention(q, q, q, scale=scale)
    return gv
'''
    mod, text = roundtrip(src)
    call = func(mod, "f").body.blocks[0].bindings[0].value
    assert call.attrs["scale"] == pytest.approx(0.25)
    assert "I.meta_var" not in text and len(func(mod, "f").body.blocks[0].bindings) == 1


def test_emit_with_ty_is_the_op_call():
    src = '''
@R.function(pure=False)
def f(x: R.Tensor((4,), "float32")):
    alloc: R.Tensor((4,), dtype="float32") = R.emit_with_ty(
        "relax.builtin.alloc_tensor",
        (R.shape([4]), R.dtype("float32"), R.prim_value(0), R.str("global")),
        (R.Tensor((4,), dtype="float32"),),
    )
    return alloc
'''
    mod, _ = roundtrip(src)
    call = func(mod, "f").body.blocks[0].bindings[0].value
    assert call.op.name == "relax.builtin.alloc_tensor"


def test_direct_call_of_a_prim_func():
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def fill(X: T.Buffer((4,), "float32")):
        for i in range(4):
            X[i] = T.float32(1)

    @T.prim_func
    def plus_one(n: T.int64) -> T.int64:
        return n + T.int64(1)

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32")):
        cls = Module
        cls.fill(x)
        k = cls.plus_one(R.prim_value(3))
        return x
'''
    mod, text = roundtrip(src)
    assert "        cls.fill(x)" in text.splitlines()
    k = func(mod, "main").body.blocks[0].bindings[1]
    assert isinstance(k.var.struct_info, relax.PrimStructInfo) and k.var.struct_info.dtype == "int64"


def test_call_tir_without_arguments_prints_r_tuple():
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def ones(X: T.Buffer((4,), "float32")):
        for i in range(4):
            X[i] = T.float32(1)

    @R.function
    def main() -> R.Tensor((4,), "float32"):
        cls = Module
        gv = R.call_tir(cls.ones, R.tuple(), out_sinfo=R.Tensor((4,), "float32"))
        return gv
'''
    mod, text = roundtrip(src)
    assert 'gv = R.call_tir(cls.ones, R.tuple(), out_sinfo=R.Tensor((4,), dtype="float32"))' in text
    assert func(mod, "main").body.blocks[0].bindings[0].value.args[1].fields == []


@pytest.mark.parametrize("body, message", [
    # a symbolic dim of the signature (int64) declared with another dtype
    ('n = T.int32()\n    return x', "is a int64 dimension of the signature"),
    # a symbolic variable annotated with another dtype
    ('v: R.Prim("float32") = T.int64()\n    return x', 'must say R.Prim\\("int64"\\)'),
    # call_tir_inplace takes its arguments as a tuple written in the call
    ('t = (x, x)\n    y = R.call_tir_inplace(cls.f, t, inplace_indices=[0], out_sinfo=R.Tensor((4,), "float32"))\n    return y',
     "write the arguments as a tuple"),
])
def test_programs_tvm_rejects(body, message):
    src = f'''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        T.evaluate(0)

    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        cls = Module
        {body.replace(chr(10) + "    ", chr(10) + "        ")}
'''
    with pytest.raises(TVMScriptError, match=message):
        tvms.parse(src)


def test_comments_stay_with_the_statement_whose_calls_were_lifted():
    src = '''
@R.function
def f(a: R.Tensor((4,), "float32")):
    # the comment above
    x = R.exp(R.exp(a))  # on the line
    return x
'''
    _, text = roundtrip(src)
    lines = text.splitlines()
    start = lines.index("    # the comment above")
    assert lines[start:start + 3] == [
        "    # the comment above",
        f"    gv: {T4} = R.exp(a)",
        f"    x: {T4} = R.exp(gv)  # on the line",
    ]


def test_module_level_extern_func():
    src = '''
@I.ir_module
class Module:
    my_ext = R.ExternFunc("my_ext")

    @R.function
    def f(a: R.Tensor((10,), "float32")) -> R.Tensor((10,), "float32"):
        return a
'''
    mod, text = roundtrip(src)
    # As TVM prints it: the global first, with no blank line before the functions.
    assert text.splitlines()[4:7] == [
        "class Module:", '    my_ext = R.ExternFunc("my_ext")', "    @R.function"]
    assert isinstance(mod["my_ext"], relax.ExternFunc) and mod["my_ext"].global_symbol == "my_ext"
