"""RewriteCUDAGraph: marks the Relax functions whose calls can replay their kernels as one CUDA
graph, so a launch-bound model (a small batch: resnet18 makes 23 launches a call, a GPT block 8)
pays the host's cost of a launch once per call.

TVM's pass of that name cuts a function into captured regions and lifts their static
allocations into a function of their own. In tvms the VM captures whole functions at run time
(`runtime.vm_cuda_graph`: it keeps the memory a capture used, and copies the outputs out of the
graph's memory on each replay), so what the compiler decides is which functions qualify. A
function is marked with the attribute ``"relax.rewrite_cuda_graph.capture": True`` (`ATTR`),
which the build turns into ``VMFunction.cuda_graph``, when its every step is one of:

* a kernel launch (``R.call_tir`` of a prim_func of the module), an allocation
  (``R.builtin.alloc_tensor``), a view (``R.reshape``), ``R.shape_of``, ``R.null_value``, a
  tuple or a field of one, ``R.match_cast``;
* a call of another Relax function of the module that qualifies too;
* an ``R.If`` on a value known from the shapes (an ``R.Prim``), not on a tensor's data;

and it launches at least one kernel, is pure, writes no tensor in place
(``R.call_tir_inplace``: a replay would apply it to its input again) and its parameters have
static shapes: a symbolic one would make a graph per size, which needs TVM's function attribute
``relax.rewrite_cuda_graph.capture_symbolic_vars`` to ask for. Anything the host must do
between two kernels leaves the function as it is: extern functions (``R.call_packed``,
``R.call_pure_packed``, ``R.call_dps_packed``), the ops the VM runs on the host (``R.sort``,
``R.topk``, ``R.shape_to_tensor``, ...), ``R.print`` and ``R.assert_op``. `capture_blocker` says
which one, and the build keeps it (``VMFunction.cuda_graph_note``).

On by default for CUDA targets, as TVM is only when asked: the runtime's checks make a function
it cannot capture run as before rather than wrongly, and the cost is the first call (run,
captured, replayed once and compared) and the memory each graph keeps (one more copy of the
function's intermediate tensors per set of argument addresses, at most four). Off with
``tvms.transform.PassContext(config={"relax.backend.use_cuda_graph": False})``, TVM's switch.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax, tir

from ._common import replace_fields
from .pass_context import PassContext

__all__ = ["RewriteCUDAGraph", "capture_blocker", "cuda_graph_enabled", "ATTR", "SYMBOLIC_ATTR"]

ATTR = "relax.rewrite_cuda_graph.capture"
SYMBOLIC_ATTR = "relax.rewrite_cuda_graph.capture_symbolic_vars"
USE_CUDA_GRAPH = "relax.backend.use_cuda_graph"

# Calls a captured function may make besides kernels and other functions: none runs host code.
_ALLOWED_OPS = frozenset(("relax.builtin.alloc_tensor", "relax.reshape", "relax.shape_of", "relax.null_value"))
_KERNEL_OPS = frozenset(("relax.call_tir", "relax.call_tir_with_grad"))
_HOST_OPS = {
    "relax.call_dps_packed": "R.call_dps_packed runs a host function",
    "relax.call_pure_packed": "R.call_pure_packed runs a host function",
    "relax.call_tir_inplace": "R.call_tir_inplace writes a tensor in place (a replay would do it again)",
    "relax.shape_to_tensor": "R.shape_to_tensor copies from the host",
    "relax.print": "R.print runs on the host", "relax.assert_op": "R.assert_op reads a value on the host",
}


def cuda_graph_enabled() -> bool:
    """Whether the current `PassContext` lets functions be captured (the default: yes)."""
    return bool(PassContext.current().get(USE_CUDA_GRAPH))


class RewriteCUDAGraph:
    """``RewriteCUDAGraph()(mod)``: the Relax functions `capture_blocker` finds nothing against
    get the attribute `ATTR`; the module as it is when none does, or when the PassContext has
    ``relax.backend.use_cuda_graph`` off."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        if not cuda_graph_enabled():
            return mod
        out = None
        for gv, func in mod.functions.items():
            if not isinstance(func, relax.Function) or func.attrs.get(ATTR) or capture_blocker(func, mod):
                continue
            out = out or mod.copy()
            out[gv] = replace_fields(func, attrs={**func.attrs, ATTR: True})
        return out if out is not None else mod

    def __repr__(self) -> str:
        return "RewriteCUDAGraph()"


def capture_blocker(func: relax.Function, mod: ir.IRModule) -> str | None:
    """Why calls of ``func`` cannot replay as a CUDA graph (a sentence), or None when they can."""
    if not func.is_pure:
        return "the function is impure"
    if not func.attrs.get(SYMBOLIC_ATTR):
        for p in func.params:
            if not _static(relax.struct_info_of(p)):
                return (f"parameter '{p.name_hint}' has no static shape (a graph per shape needs the attribute "
                        f"{SYMBOLIC_ATTR})")
    found = _Scan(mod)
    reason = found.function(func)
    if reason is None and not found.kernels:
        return "it launches no kernel"
    return reason


def _static(sinfo) -> bool:
    """A parameter whose value's shape (and so every allocation after it) is fixed."""
    if isinstance(sinfo, relax.TensorStructInfo):
        return (isinstance(sinfo.shape, list) and bool(sinfo.dtype)
                and all(isinstance(d, tir.IntImm) for d in sinfo.shape))
    if isinstance(sinfo, relax.ShapeStructInfo):
        return sinfo.values is not None and all(isinstance(d, tir.IntImm) for d in sinfo.values)
    if isinstance(sinfo, relax.PrimStructInfo):
        return isinstance(sinfo.value, tir.IntImm)
    if isinstance(sinfo, relax.TupleStructInfo):
        return all(_static(f) for f in sinfo.fields)
    return False


class _Scan:
    """Walks a function's body (and the functions it calls, once each) for the first step
    that cannot be captured; counts the kernels it launches."""

    def __init__(self, mod: ir.IRModule) -> None:
        self.mod = mod
        self.kernels = 0
        self.visited: dict = {}     # callee name -> its reason (None while being scanned: recursion)

    def function(self, func: relax.Function) -> str | None:
        return self.seq(func.body)

    def lookup(self, gv: ir.GlobalVar):
        """The function ``gv`` names in the module (by name: a call's GlobalVar may be another
        object of that name), or None."""
        return self.mod[gv.name_hint] if gv.name_hint in self.mod else None

    def seq(self, s: relax.SeqExpr) -> str | None:
        for block in s.blocks:
            for b in block.bindings:
                reason = self.expr(b.value)
                if reason is not None:
                    return reason
        return self.expr(s.body)

    def expr(self, e) -> str | None:
        if isinstance(e, relax.Call):
            return self.call(e)
        if isinstance(e, relax.Tuple):
            return next((r for r in map(self.expr, e.fields) if r is not None), None)
        if isinstance(e, relax.TupleGetItem):
            return self.expr(e.tuple_value)
        if isinstance(e, relax.If):
            if not isinstance(relax.struct_info_of(e.cond), relax.PrimStructInfo):
                return "an R.If on a tensor's value (control flow that depends on data)"
            return self.seq(e.true_branch) or self.seq(e.false_branch)
        if isinstance(e, relax.SeqExpr):
            return self.seq(e)
        if isinstance(e, relax.Function):
            return "a local function"
        return None

    def call(self, call: relax.Call) -> str | None:
        op = call.op
        if isinstance(op, relax.Op):
            return self.op_call(call)
        if isinstance(op, relax.ExternFunc):
            return f"it calls the host function {op.global_symbol!r}"
        if isinstance(op, ir.GlobalVar) and isinstance(self.lookup(op), relax.Function):
            return self.callee(op)
        return "it calls a function value"

    def op_call(self, call: relax.Call) -> str | None:
        name = call.op.name
        if name in _KERNEL_OPS:
            callee = call.args[0]
            if isinstance(callee, ir.GlobalVar) and isinstance(self.lookup(callee), tir.PrimFunc):
                self.kernels += 1
                return None
            if isinstance(callee, relax.ExternFunc):
                if isinstance(self.mod[callee.global_symbol] if callee.global_symbol in self.mod else None,
                              tir.PrimFunc):
                    self.kernels += 1  # a prim_func named by its symbol, as the VM runs it
                    return None
                return f"it calls the host function {callee.global_symbol!r}"
            return "R.call_tir of something that is not a prim_func of the module"
        if name in _HOST_OPS:
            return _HOST_OPS[name]
        if name in _ALLOWED_OPS:
            return None
        if name in ("relax.sort", "relax.argsort", "relax.topk", "relax.dynamic_strided_slice"):
            return f"R.{name[len('relax.'):]} runs on the host"
        return f"R.{name[len('relax.'):]} is not lowered to a kernel"

    def callee(self, gv: ir.GlobalVar) -> str | None:
        name = gv.name_hint
        if name not in self.visited:
            self.visited[name] = None
            reason = self.function(self.lookup(gv))
            self.visited[name] = f"it calls '{name}', where {reason}" if reason else None
        return self.visited[name]
