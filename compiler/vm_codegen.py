"""The VM's program: each Relax function translated once into Python source, which the VM runs.

The translation resolves everything that does not depend on the arguments, so a call costs
what the Python lines below cost and nothing more::

    def _fn0_main(*args):                 # ex.as_python() shows this code
        if len(args) != 2: _arity(_F0_o0_sig, args)
        x, y = args
        if x.__class__ is not _Tensor: x = _coerce(x, _F0_o0_sig, 0)   # NumPy: wrapped, no copy
        _s = x._shape
        if x._dtype != 'float32' or len(_s) != 2: _bad(_F0_o0_sig, 0, x, {})
        n = _s[0]                              # a symbolic dim binds at its first use ...
        ...                                    # ... and is compared everywhere after
        lv = _empty((n, 4), 'float32')         # or a slot of the function's arena
        _K0_add1(x._ptr, lv._ptr, n)           # the kernel's ctypes entry: pointers, scalars, dims
        if _kerr: _kraise()                    # an assertion the kernel reported
        return lv

The helpers the code calls (``_arity``, ``_coerce``, ``_bad``, ``_empty``, ...) are the VM's,
named by the constants of `runtime.vm_helpers`; what the code hands them about the program
(signatures, annotations, call sites) is plain data of the runtime (`runtime.executable.FuncSig`,
`runtime.value_specs`, `runtime.sites.Site`), so the VM runs without the IR. Checks that the
build can prove (a call_tir argument's static shape against the prim_func's buffer,
`compiler.kernel_args`) are done here and fail the build, naming the call; the others run at
call time. Intermediate tensors that never leave a function take slots of its arena
(`compiler.memory_plan`).
"""

from __future__ import annotations

import keyword
import re

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.op.call_tir import describe_arg
from tvmscript.runtime import vm_helpers as helpers
from tvmscript.runtime.executable import FuncSig, VMFunction, compile_source
from tvmscript.runtime.sites import Site

from .build_error import BuildError, where
from .kernel_args import plan_kernel_args
from .memory_plan import arena_candidates, arena_layout, static_shape
from .vm_specs import value_spec

__all__ = ["FunctionCodegen", "py_function_name", "VM_OPS", "symbol_bounds"]

# The ops the VM runs itself (any other Relax op must be lowered to a kernel first).
VM_OPS = frozenset((
    "relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed", "relax.builtin.alloc_tensor",
    "relax.call_tir_inplace", "relax.call_tir_with_grad",
    "relax.null_value", "relax.shape_of", "relax.shape_to_tensor", "relax.sort", "relax.argsort", "relax.topk",
    "relax.dynamic_strided_slice", "relax.print", "relax.assert_op", "relax.reshape",
))

# Impure builtins the VM runs for their effect: the op's name, its helper. Their arguments (the
# format string first for print, after the condition for assert_op) are passed as they are.
_EFFECT_OPS = {"relax.print": helpers.PRINT, "relax.assert_op": helpers.ASSERT}

# Ops the VM runs on the host (TVM's LegalizeOps leaves sort/argsort/topk for a sort library;
# dynamic_strided_slice's output shape is known only at run time): the op's name, its helper,
# the attributes it takes after the call's arguments, in order.
_HOST_OPS = {
    "relax.sort": (helpers.SORT, ("axis", "descending")),
    "relax.argsort": (helpers.ARGSORT, ("axis", "descending", "dtype")),
    "relax.topk": (helpers.TOPK, ("k", "axis", "ret_type", "largest", "dtype")),
    "relax.dynamic_strided_slice": (helpers.DYNAMIC_STRIDED_SLICE, ()),
}


_BINOPS = {
    tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.FloorDiv: "//", tir.FloorMod: "%",
    tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">=",
    tir.And: "and", tir.Or: "or",
}


class FunctionCodegen:
    """Translates one Relax function into the Python source of a VM function."""

    def __init__(self, name: str, index: int, func: relax.Function, kernels: dict, relax_funcs: dict) -> None:
        self.name = name
        self.func = func
        self.kernels = kernels
        self.relax_funcs = relax_funcs
        self.prefix = f"_F{index}"
        self.pyname = py_function_name(name, index)
        self.lines: list[str] = []
        self.indent = 1
        self.used: set[str] = set(_RESERVED)
        self.vars: dict = {}          # relax.Var -> Python local
        self.syms: dict = {}          # symbolic dim name -> Python local (bound so far)
        self.kernel_globals: dict = {}
        self.constants: dict = {}
        self.objects: dict = {}
        self.n_kernel_calls = 0
        self.sig = FuncSig(name, [p.name_hint for p in func.params],
                           [value_spec(p.struct_info) for p in func.params])
        self.arena_vars = arena_candidates(func, kernels)
        self.arena: list = []
        self.arena_bytes = 0
        self.arena_slot: dict = {}    # relax.Var -> Python local holding its arena tensor
        self.var_trust: dict = {p: p.struct_info for p in func.params}
        # The binding each line computes (runtime/sites.py): where an error raised there is.
        self.site = None
        self.line_sites: list = []

    # ---- helpers
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)
        self.line_sites.append(self.site)

    def fresh(self, hint: str, internal: bool = False) -> str:
        """A new Python local for ``hint``. Names from the program never start with "_" here
        (those belong to the VM's helpers and globals) and never shadow a builtin it uses."""
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or (base[0] == "_" and not internal):
            base = "v" + base
        name = base
        k = 1
        while name in self.used or keyword.iskeyword(name):
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def glob(self, kind: str, value, store: dict, hint: str = "") -> str:
        for g, v in store.items():
            if v is value:
                return g
        g = f"{self.prefix}_{kind}{len(store)}" + (f"_{re.sub(r'[^0-9A-Za-z_]', '_', hint)}" if hint else "")
        store[g] = value
        return g

    def obj(self, value, hint: str = "") -> str:
        return self.glob("o", value, self.objects, hint)

    def error(self, message: str, span=None, var=None) -> BuildError:
        return BuildError(f"{message} ({where(self.name, var)})", span)

    # ---- the function
    def run(self):
        func = self.func
        params = []
        for p in func.params:
            local = self.fresh(p.name_hint)
            self.vars[p] = local
            params.append(local)
        sig_name = self.obj(self.sig, "sig")
        header = [f"def {self.pyname}(*args):",
                  f"    # Relax function '{self.name}'",
                  f"    if len(args) != {len(params)}: {helpers.ARITY}({sig_name}, args)"]
        if params:
            header.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = args")
        self.header = header
        self.emit_param_checks(params, sig_name)
        self.emit_range_checks(sig_name)

        # Arena slots: one aligned block per frame, carved into the intermediate tensors.
        self.arena, self.arena_bytes = arena_layout(self.arena_vars)
        arena_locals = []
        for var in self.arena_vars:
            local = self.fresh(var.name_hint)
            self.arena_slot[var] = local
            arena_locals.append(local)
        pool = f"{self.prefix}_pool"
        factory = f"{self.prefix}_frame"
        if arena_locals:
            self.emit("try:")
            self.emit(f"    _fr = {pool}.pop()")
            self.emit("except IndexError:")
            self.emit(f"    _fr = {factory}()")
            self.emit(f"{', '.join(arena_locals)}{',' if len(arena_locals) == 1 else ''} = _fr")

        result = self.seq(func.body)
        if arena_locals:
            self.emit(f"{pool}.append(_fr)")
        self.emit(f"return {result}")

        source = "\n".join(self.header + self.lines) + "\n"
        code = compile_source(source, f"<tvms vm: {self.name}>")
        first = len(self.header) + 1
        return VMFunction(
            name=self.name, pyname=self.pyname, sig=self.sig, source=source, code=code,
            kernels=self.kernel_globals, constants=self.constants, objects=self.objects,
            arena=self.arena, arena_bytes=self.arena_bytes, arena_names=(pool, factory),
            num_kernel_calls=self.n_kernel_calls,
            sites={first + i: site for i, site in enumerate(self.line_sites) if site is not None},
        )

    # ---- parameters
    def emit_param_checks(self, params: list, sig_name: str) -> None:
        deferred = []   # (param index, local, checks needing symbols bound by later params)
        for i, (p, local) in enumerate(zip(self.func.params, params)):
            sinfo = p.struct_info
            before = dict(self.syms)
            if isinstance(sinfo, relax.TensorStructInfo):
                later = self.tensor_check(local, sinfo, i, sig_name, before)
                if later:
                    deferred.append((i, local, later))
            elif sinfo is None or isinstance(sinfo, relax.ObjectStructInfo):
                continue
            else:
                self.generic_match(local, sinfo, f"{self.name}() argument '{p.name_hint}'", origin=i)
        for i, local, checks in deferred:
            conds = []
            for d, e in checks:
                conds.append(f"_s[{d}] != {self.dim(e, None)}")
            self.emit(f"_s = {local}._shape")
            self.emit(f"if {' or '.join(conds)}: {helpers.BAD}({sig_name}, {i}, {local}, {self.env_literal()})")

    def emit_range_checks(self, sig_name: str) -> None:
        """The function's ``tir_var_lower_bound``/``tir_var_upper_bound`` attributes (the ranges
        ``torch.export.Dim(min=, max=)`` gave a symbolic dim) checked for each symbol the
        parameters bound: a size outside its range is the caller's error, raised at entry."""
        for name, (lo, hi) in symbol_bounds(self.func).items():
            local = self.syms.get(name)
            if local is None:
                continue
            self.sig.sym_bounds[name] = (lo, hi)
            conds = ([f"{local} < {lo}"] if lo is not None else []) + ([f"{local} > {hi}"] if hi is not None else [])
            self.emit(f"if {' or '.join(conds)}: {helpers.OUT_OF_RANGE}({sig_name}, {name!r}, {local})")

    def env_literal(self, syms: dict | None = None) -> str:
        syms = self.syms if syms is None else syms
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in syms.items()) + "}"

    def tensor_check(self, local: str, sinfo, i: int, sig_name: str, before: dict):
        """Fast checks of one tensor parameter; binds its new symbolic dims. Returns the dim
        checks that need symbols bound only by later parameters."""
        self.emit(f"if {local}.__class__ is not {helpers.TENSOR}: {local} = {helpers.COERCE}({local}, {sig_name}, {i})")
        bad = f"{helpers.BAD}({sig_name}, {i}, {local}, {self.env_literal(before)})"
        if sinfo.shape is not None and all(isinstance(d, tir.IntImm) for d in sinfo.shape):
            shape = static_shape(sinfo)
            cond = f"{local}._shape != {shape!r}"
            if sinfo.dtype:
                cond += f" or {local}._dtype != {sinfo.dtype!r}"
            self.emit(f"if {cond}: {bad}")
            return []
        first = []
        if sinfo.dtype:
            first.append(f"{local}._dtype != {sinfo.dtype!r}")
        if sinfo.ndim >= 0:
            first.append(f"len(_s) != {sinfo.ndim}")
        if sinfo.shape is None:
            if first:
                self.emit(f"_s = {local}._shape")
                self.emit(f"if {' or '.join(first)}: {bad}")
            return []
        self.emit(f"_s = {local}._shape")
        if first:
            self.emit(f"if {' or '.join(first)}: {bad}")
        # Bind the dims that are a symbol seen for the first time.
        checks = []
        for d, e in enumerate(sinfo.shape):
            if isinstance(e, tir.Var) and e.name not in self.syms:
                py = self.fresh(e.name)
                self.emit(f"{py} = _s[{d}]")
                self.syms[e.name] = py
                self.sig.sym_origin.setdefault(e.name, (i, d))
            else:
                checks.append((d, e))
        now, later = [], []
        for d, e in checks:
            (now if _free_syms(e) <= set(self.syms) else later).append((d, e))
        if now:
            conds = [f"_s[{d}] != {self.dim(e, None)}" for d, e in now]
            bad_now = f"{helpers.BAD}({sig_name}, {i}, {local}, {self.env_literal(before)})"
            self.emit(f"if {' or '.join(conds)}: {bad_now}")
        return later

    def generic_match(self, local: str, sinfo, what: str, origin=None) -> None:
        """Check ``local`` against any struct info through the VM's general matcher, which binds
        new symbolic dims into the env dict it is given; the bound ones are read back."""
        names_before = set(self.syms)
        new = [n for n in relax.sinfo_symbols(sinfo) if n not in names_before]
        si = self.obj(value_spec(sinfo), "sinfo")
        env = "_e" if new else self.env_literal()
        if new:
            self.emit(f"_e = {self.env_literal()}")
        self.emit(f"{local} = {helpers.MATCH}({local}, {si}, {env}, {what!r})")
        for n in new:
            py = self.fresh(n)
            self.emit(f"{py} = _e[{n!r}]")
            self.syms[n] = py
            if origin is not None:
                self.sig.sym_origin.setdefault(n, (origin, None))

    # ---- expressions
    def dim(self, e, var) -> str:
        """A TIR expression (a shape dim, a prim value) as Python, over the bound symbols."""
        if isinstance(e, tir.IntImm):
            if e.dtype == "bool":
                return "True" if e.value else "False"
            return str(int(e.value))
        if isinstance(e, tir.FloatImm):
            v = float(e.value)
            return repr(v) if v == v and v not in (float("inf"), float("-inf")) else f"float({str(v)!r})"
        if isinstance(e, tir.Var):
            if e.name not in self.syms:
                raise self.error(
                    f"symbolic dimension '{e.name}' is used before anything gives it a value "
                    f"(a parameter's shape or an R.match_cast must bind it)", getattr(e, "span", None), var)
            return self.syms[e.name]
        op = _BINOPS.get(type(e))
        if op is not None:
            return f"({self.dim(e.a, var)} {op} {self.dim(e.b, var)})"
        if isinstance(e, tir.Div):
            a, b = self.dim(e.a, var), self.dim(e.b, var)
            return f"{helpers.TRUNCDIV}({a}, {b})" if tir.is_int(e.dtype) else f"({a} / {b})"
        if isinstance(e, tir.Mod):
            return f"{helpers.TRUNCMOD}({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Min):
            return f"min({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Max):
            return f"max({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Not):
            return f"(not {self.dim(e.a, var)})"
        if isinstance(e, tir.Select):
            return (f"({self.dim(e.true_value, var)} if {self.dim(e.condition, var)} "
                    f"else {self.dim(e.false_value, var)})")
        if isinstance(e, tir.Cast):
            conv = "float" if tir.is_float(e.dtype) else ("bool" if e.dtype == "bool" else "int")
            return f"{conv}({self.dim(e.value, var)})"
        raise self.error(f"unsupported expression {type(e).__name__} in a shape or prim value", None, var)

    def shape_literal(self, sinfo, var) -> str:
        dims = [self.dim(d, var) for d in sinfo.shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def atom(self, e, var=None) -> str:
        """Python for a Relax expression; calls and ifs are bound to a temporary first."""
        if isinstance(e, relax.Var):
            if e not in self.vars:
                raise self.error(f"variable '{e.name_hint}' is used before it is defined",
                                 getattr(e, "span", None), var)
            return self.vars[e]
        if isinstance(e, relax.Constant):
            import numpy as np

            data = np.require(e.data, requirements="C")  # ascontiguousarray makes 0-d arrays 1-d
            return self.glob("c", data, self.constants)
        if isinstance(e, relax.Tuple):
            items = [self.atom(f, var) for f in e.fields]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(e, relax.TupleGetItem):
            return f"{self.atom(e.tuple_value, var)}[{int(e.index)}]"
        if isinstance(e, relax.ShapeExpr):
            dims = [self.dim(d, var) for d in e.values]
            return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        if isinstance(e, relax.PrimValue):
            return self.dim(e.value, var)
        if isinstance(e, (relax.StringImm, relax.DataTypeImm)):
            return repr(e.value)
        if isinstance(e, relax.ExternFunc):
            return f"{helpers.EXTERN}({e.global_symbol!r})"
        if isinstance(e, ir.GlobalVar):
            if e.name_hint in self.relax_funcs:
                return py_function_name(e.name_hint, list(self.relax_funcs).index(e.name_hint))
            raise self.error(f"'{e.name_hint}' is a T.prim_func: call it with R.call_tir", None, var)
        if isinstance(e, (relax.Call, relax.If, relax.SeqExpr)):
            tmp = self.fresh("_t", internal=True)
            self.bind_value(tmp, e, None)
            return tmp
        raise self.error(f"the VM cannot evaluate a {type(e).__name__} yet", getattr(e, "span", None), var)

    # ---- what is known for sure about values
    def trusted(self, e):
        """The struct info a value is known to satisfy at run time, in this function's symbols
        (None when nothing is certain: results of Relax function calls and ifs, whose struct
        info is the callee's claim, are not relied on for unchecked kernel calls)."""
        if isinstance(e, relax.Var):
            return self.var_trust.get(e)
        if isinstance(e, relax.Constant):
            return e.struct_info
        if isinstance(e, relax.TupleGetItem):
            t = self.trusted(e.tuple_value)
            if isinstance(t, relax.TupleStructInfo) and 0 <= e.index < len(t.fields):
                return t.fields[e.index]
        return None

    def trust_of_value(self, value):
        if isinstance(value, (relax.Var, relax.Constant, relax.TupleGetItem)):
            return self.trusted(value)
        if isinstance(value, relax.Tuple):
            return relax.TupleStructInfo([self.trusted(f) or relax.ObjectStructInfo() for f in value.fields])
        if isinstance(value, relax.Call):
            op = value.op
            if isinstance(op, relax.Op) and op.name in ("relax.call_tir", "relax.call_dps_packed",
                                                          "relax.builtin.alloc_tensor"):
                return value.struct_info
            if isinstance(op, relax.Op) and op.name == "relax.reshape":  # as sure as its input
                return value.struct_info if self.trusted(value.args[0]) is not None else None
            if (isinstance(op, relax.ExternFunc) or isinstance(op, relax.Op)) and value.sinfo_args:
                return value.struct_info  # call_packed results are checked against it
        return None

    # ---- bodies
    def seq(self, s: relax.SeqExpr) -> str:
        for block in s.blocks:
            for b in block.bindings:
                self.binding(b)
        return self.atom(s.body)

    def binding(self, b) -> None:
        outer = self.site
        span = b.value.span if isinstance(b.value, relax.Call) else getattr(b.var, "span", None)
        self.site = Site(self.name, b.var.name_hint, span)
        try:
            self.bind(b)
        finally:
            self.site = outer

    def bind(self, b) -> None:
        var = b.var
        local = self.arena_slot.get(var)
        if local is None:
            local = self.fresh(var.name_hint) if var.name_hint != "_" else self.fresh("_u", internal=True)
        if isinstance(b, relax.MatchCast):
            value = self.atom(b.value, var)
            self.vars[var] = local
            self.emit(f"{local} = {value}")
            self.generic_match(local, b.struct_info, f"R.match_cast of '{var.name_hint}' in {self.name}()")
            self.var_trust[var] = b.struct_info
            return
        self.bind_value(local, b.value, var)
        self.vars[var] = local
        trust = self.trust_of_value(b.value)
        if trust is not None:
            self.var_trust[var] = trust

    def bind_value(self, local: str, value, var) -> None:
        if isinstance(value, relax.Call):
            self.call(local, value, var)
        elif isinstance(value, relax.If):
            self.if_(local, value, var)
        elif isinstance(value, relax.SeqExpr):
            saved = dict(self.syms)
            self.emit(f"{local} = {self.seq(value)}")
            self.syms = saved
        else:
            self.emit(f"{local} = {self.atom(value, var)}")

    def if_(self, local: str, e: relax.If, var) -> None:
        cond = self.atom(e.cond, var)
        csinfo = relax.struct_info_of(e.cond)
        test = cond if isinstance(csinfo, relax.PrimStructInfo) else f"{helpers.TRUTH}({cond})"
        self.emit(f"if {test}:")
        for branch in (e.true_branch, e.false_branch):
            self.indent += 1
            saved = dict(self.syms)
            mark = len(self.lines)
            result = self.seq(branch)
            self.emit(f"{local} = {result}")
            if len(self.lines) == mark:  # pragma: no cover - a branch always assigns
                self.emit("pass")
            self.syms = saved
            self.indent -= 1
            if branch is e.true_branch:
                self.emit("else:")

    # ---- calls
    def call(self, local: str, call: relax.Call, var) -> None:
        op = call.op
        if isinstance(op, relax.Op):
            name = op.name
            if name in ("relax.call_tir_inplace", "relax.call_tir_with_grad"):
                callee = call.args[0]
                if not isinstance(callee, ir.GlobalVar) or callee.name_hint not in self.kernels:
                    raise self.error(f"R.{name[len('relax.'):]} expects a T.prim_func of this module", call.span, var)
                return self.kernel_call(local, callee.name_hint, call, var, call.attrs.get("inplace_indices"))
            if name in ("relax.call_tir", "relax.call_dps_packed"):
                callee = call.args[0]
                if isinstance(callee, ir.GlobalVar):
                    if callee.name_hint not in self.kernels:
                        raise self.error(f"R.call_tir to '{callee.name_hint}', which is not a T.prim_func of "
                                         "this module", call.span, var)
                    return self.kernel_call(local, callee.name_hint, call, var)
                if isinstance(callee, relax.ExternFunc):
                    if callee.global_symbol in self.kernels:
                        return self.kernel_call(local, callee.global_symbol, call, var)
                    return self.dps_extern(local, callee.global_symbol, call, var)
                raise self.error(f"{name} expects a prim_func or an extern function name", call.span, var)
            if name == "relax.call_pure_packed":
                callee = call.args[0]
                return self.packed(local, callee, call.args[1:], call, var)
            if name == "relax.builtin.alloc_tensor":
                return self.alloc_tensor(local, call, var)
            if name == "relax.null_value":
                self.emit(f"{local} = None")  # TVM's vm.builtin.null_value: an empty object
                return None
            if name == "relax.shape_of":  # TVM's vm.builtin.shape_of: a Shape is a tuple of ints here
                self.emit(f"{local} = tuple({self.atom(call.args[0], var)}._shape)")
                return None
            if name == "relax.reshape":  # TVM's vm.builtin.reshape: a view (transform/rewrite_reshape.py)
                shape = self.shape_literal(call.struct_info or relax.struct_info_of(var), var)
                self.emit(f"{local} = {helpers.RESHAPE}({self.atom(call.args[0], var)}, {shape})")
                return None
            if name == "relax.shape_to_tensor":
                self.emit(f"{local} = {helpers.SHAPE_TENSOR}({self.atom(call.args[0], var)})")
                return None
            if name in _EFFECT_OPS:
                values = [self.atom(a, var) for a in call.args]
                self.emit(f"{local} = {_EFFECT_OPS[name]}({', '.join(values)})")
                return None
            if name in _HOST_OPS:
                helper, attrs = _HOST_OPS[name]
                values = [self.atom(a, var) for a in call.args] + [repr(call.attrs[a]) for a in attrs]
                self.emit(f"{local} = {helper}({', '.join(values)})")
                return None
            raise self.error(f"{name} is not supported by the VM", call.span, var)
        if isinstance(op, relax.ExternFunc):
            return self.packed(local, op, call.args, call, var)
        if isinstance(op, ir.GlobalVar):
            if op.name_hint in self.relax_funcs:
                fn = py_function_name(op.name_hint, list(self.relax_funcs).index(op.name_hint))
                args = [self.atom(a, var) for a in call.args]
                self.emit(f"{local} = {fn}({', '.join(args)})")
                return None
            raise self.error(f"'{op.name_hint}' is a T.prim_func: call it with R.call_tir", call.span, var)
        # A call of a function value (a variable holding a function).
        fn = self.atom(op, var)
        args = [self.atom(a, var) for a in call.args]
        self.emit(f"{local} = {fn}({', '.join(args)})")
        return None

    def out_tensors(self, local: str, sinfos: list, var, arena_ok: bool, call) -> list:
        outs = []
        for k, s in enumerate(sinfos):
            if not isinstance(s, relax.TensorStructInfo) or s.shape is None or not s.dtype:
                raise self.error("the output of a call must have a known shape and dtype "
                                 "(out_sinfo=R.Tensor(shape, dtype))", call.span, var)
            if arena_ok and var is not None and var in self.arena_slot and len(sinfos) == 1:
                outs.append(self.arena_slot[var])
                continue
            name = local if len(sinfos) == 1 else self.fresh(f"{local}_{k}")
            self.emit(f"{name} = {helpers.EMPTY}({self.shape_literal(s, var)}, {s.dtype!r})")
            outs.append(name)
        return outs

    def kernel_call(self, local: str, kname: str, call: relax.Call, var, inplace=None) -> None:
        """A PrimFunc call: its arguments, then its new outputs. With ``inplace`` (call_tir_inplace's
        indices), output ``i`` is the argument ``inplace[i]``, which the kernel writes in place;
        only the outputs at -1 are allocated and passed after the arguments."""
        kernel = self.kernels[kname]
        args_tuple = call.args[1]
        if not isinstance(args_tuple, relax.Tuple):
            raise self.error("R.call_tir expects its arguments as a tuple", call.span, var)
        args = list(args_tuple.fields)
        tir_vars = list(call.args[2].values) if len(call.args) > 2 and isinstance(call.args[2], relax.ShapeExpr) else []
        sinfos = list(call.sinfo_args)
        arg_atoms = [self.atom(a, var) for a in args]
        tensors = list(zip(arg_atoms, [self.trusted(a) for a in args], [describe_arg(a) for a in args]))
        if inplace is None:
            outs = self.out_tensors(local, sinfos, var, True, call)
            tensors += [(o, s, f"output {k}") for k, (o, s) in enumerate(zip(outs, sinfos))]
        else:
            outs = self.inplace_outputs(local, inplace, arg_atoms, sinfos, var, call)
            tensors += [(outs[k], s, f"output {k}") for k, (i, s) in enumerate(zip(inplace, sinfos)) if i == -1]
        plan = plan_kernel_args(kname, kernel, tensors, tir_vars, lambda m: self.error(m, call.span, var))
        self.n_kernel_calls += 1
        kglob = self.kernel_globals_name(kname)
        outer = self.site
        self.site = self.call_site(call, kname)
        if plan.runtime_check:
            scalars = "".join(f"{self.dim(e, var)}, " for e in plan.scalars)
            self.emit(f"{helpers.KCHECK}({self.obj(kernel, 'kernel_' + kname)}, ({', '.join(plan.buffer_atoms)},), "
                      f"{self.obj(self.site, 'site')}, ({scalars}))")
        # The kernel's machine-code ABI: buffer data pointers in parameter order, then the
        # scalar parameters (tir_vars), then one int64 per symbolic dim (kernel.sym_vars).
        values = [f"{atom}._ptr" for atom in plan.buffer_atoms]
        values += [self.dim(e, var) for e in plan.scalars]
        for kind, item in plan.syms:
            if kind == "expr":
                values.append(self.dim(item, var))
            elif kind == "shape":
                values.append(f"{item[0]}._shape[{item[1]}]")
            else:  # a stride of a compact tensor
                values.append(f"{helpers.STRIDE}({item[0]}, {item[1]})")
        self.emit(f"{kglob}({', '.join(values)})")
        self.emit(f"if {helpers.KERR}: {helpers.KRAISE}()")
        self.site = outer
        if len(outs) > 1:
            self.emit(f"{local} = ({', '.join(outs)},)")
        elif outs[0] != local:
            self.emit(f"{local} = {outs[0]}")

    def call_site(self, call: relax.Call, kname: str):
        """The `Site` of a kernel call: the binding it is in, the call's span, the kernel."""
        binding = self.site.binding if self.site is not None else ""
        return Site(self.name, binding, call.span, kname)

    def inplace_outputs(self, local: str, inplace, arg_atoms: list, sinfos: list, var, call) -> list:
        """call_tir_inplace's outputs: the argument named by each index, a new tensor at -1."""
        if len(inplace) != len(sinfos) or any(i < -1 or i >= len(arg_atoms) for i in inplace):
            raise self.error(f"R.call_tir_inplace: inplace_indices {list(inplace)} do not fit "
                             f"{len(arg_atoms)} argument(s) and {len(sinfos)} output(s)", call.span, var)
        outs = []
        for k, (i, s) in enumerate(zip(inplace, sinfos)):
            if i >= 0:
                outs.append(arg_atoms[i])
            else:
                outs += self.out_tensors(self.fresh(f"{local}_{k}"), [s], var, False, call)
        return outs

    def kernel_globals_name(self, kname: str) -> str:
        g = f"_K{list(self.kernels).index(kname)}_" + re.sub(r"\W", "_", kname)
        self.kernel_globals[g] = kname
        return g

    def dps_extern(self, local: str, fname: str, call: relax.Call, var) -> None:
        args_tuple = call.args[1]
        args = list(args_tuple.fields) if isinstance(args_tuple, relax.Tuple) else [args_tuple]
        arg_atoms = [self.atom(a, var) for a in args]
        outs = self.out_tensors(local, list(call.sinfo_args), var, False, call)
        self.emit(f"{helpers.EXTERN}({fname!r})({', '.join(arg_atoms + outs)})")
        if len(outs) > 1:
            self.emit(f"{local} = ({', '.join(outs)},)")

    def packed(self, local: str, callee, args: list, call: relax.Call, var) -> None:
        if not isinstance(callee, relax.ExternFunc):
            raise self.error("R.call_packed expects the function's name as a string", call.span, var)
        arg_atoms = [self.atom(a, var) for a in args]
        self.emit(f"{local} = {helpers.EXTERN}({callee.global_symbol!r})({', '.join(arg_atoms)})")
        sinfo = call.struct_info
        if sinfo is not None and not isinstance(sinfo, relax.ObjectStructInfo):
            self.generic_match(local, sinfo, f"the result of R.call_packed('{callee.global_symbol}') in {self.name}()")

    def alloc_tensor(self, local: str, call: relax.Call, var) -> None:
        if var is not None and var in self.arena_slot:
            if self.arena_slot[var] != local:  # pragma: no cover
                self.emit(f"{local} = {self.arena_slot[var]}")
            return
        shape = self.atom(call.args[0], var)
        dtype = call.args[1].value if isinstance(call.args[1], relax.DataTypeImm) else call.struct_info.dtype
        self.emit(f"{local} = {helpers.EMPTY}({shape}, {dtype!r})")


# Names the generated code uses that a program's variable must never shadow: the VM's
# helpers, the function's own locals, the builtins it calls.
_RESERVED = {
    *helpers.NAMES, "args", "_s", "_e", "_fr", "min", "max", "int", "float", "bool", "len", "True", "False", "None",
}


def py_function_name(name: str, index: int) -> str:
    return f"_fn{index}_" + re.sub(r"\W", "_", name)


# Function attributes giving symbolic dims their ranges, as TVM's importers write them:
# {"tir_var_upper_bound": {"seq": 15}} (inclusive bounds, by the symbol's name).
LOWER_BOUND_ATTR = "tir_var_lower_bound"
UPPER_BOUND_ATTR = "tir_var_upper_bound"


def symbol_bounds(func) -> dict:
    """``{symbol name: (lower or None, upper or None)}`` from a function's bound attributes."""
    attrs = getattr(func, "attrs", None) or {}
    out: dict = {}
    for key, side in ((LOWER_BOUND_ATTR, 0), (UPPER_BOUND_ATTR, 1)):
        for name, value in dict(attrs.get(key) or {}).items():
            pair = out.setdefault(str(name), [None, None])
            pair[side] = int(value.value if isinstance(value, tir.IntImm) else value)
    return {name: tuple(pair) for name, pair in out.items()}


def _free_syms(e) -> set:
    """Names of the symbolic dims an expression uses."""
    from tvmscript.ir.tir_visitor import vars_in

    return {v.name for v in vars_in([e])}
