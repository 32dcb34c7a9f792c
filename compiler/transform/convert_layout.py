"""ConvertLayout: convolutions and poolings rewritten to compute in another data layout, as TVM's
``relax.transform.ConvertLayout(desired_layouts)`` does (``{"relax.nn.conv2d": ["NHWC", "HWIO"]}``).

Why: a layout is a choice the model's author rarely makes for the machine. PyTorch and ONNX
models arrive in NCHW, while the CPU schedule's convolution tile vectorizes over the output
channels, which NHWC stores contiguously: the tile then stores whole vectors where NCHW takes a
store per pixel and channel, and its padded input is one contiguous copy (resnet18's 3x3
convolutions ran 0.83-0.93x their NCHW time). Converting each convolution alone would put two
transposes around it; the pass instead carries the new layout forward through what does not
care about it, as TVM's does:

* an op in ``desired_layouts`` (``nn.conv2d``: data and kernel layouts; a pooling: its layout)
  takes its data, and a convolution its kernel, in the desired layout (``R.permute_dims``
  first, unless the value is already in it), and its result stays in that layout;
* a pooling whose data already is in another layout pools in that layout;
* elementwise ops (``R.nn.relu``, ``R.clip``, ``R.astype``...) and broadcasting binary ops
  (``R.add``: a bias shaped ``(1, C, 1, 1)`` is permuted too; a scalar is left as it is) keep
  the layout of their converted operands;
* anything else, and a value seen outside its dataflow block, reads the original layout: one
  ``R.permute_dims`` back, emitted where it is first needed.

The layouts are plain permutations of the op's own (``NCHW`` to ``NHWC``, ``OIHW`` to
``HWIO``); packed ones (``NCHW16c``) are refused. A kernel that is a bound constant is permuted
by FoldConstant at build time. Calls in the branches of an ``R.If`` bound inside a block are left
in their layout (the branches of a function body that is an ``R.If`` are converted as blocks of
their own).
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.op import api as op
from tvmscript.ir.op.elementwise import BINARY_OPS, COMPARE_OPS, LOGICAL_OPS, UNARY_OPS

from ._common import op_name, substitute_relax, walk_relax
from ._rewrite_calls import CallRewriter, rewrite_functions

# The ops whose layout attributes this pass rewrites: the attribute naming the data layout, and
# the kernel's (convolutions).
_LAYOUT_OPS = {
    "relax.nn.conv2d": ("data_layout", "kernel_layout"),
    "relax.nn.max_pool2d": ("layout", None),
    "relax.nn.avg_pool2d": ("layout", None),
    "relax.nn.adaptive_avg_pool2d": ("layout", None),
}
# Ops computed element by element, whatever the layout of their one tensor operand.
_ELEMENTWISE = frozenset(["relax." + n for n in UNARY_OPS] + [
    "relax.clip", "relax.astype", "relax.isnan", "relax.isinf", "relax.isfinite", "relax.nn.leakyrelu",
    "relax.nn.softplus"])
# Ops broadcasting two operands against each other by position.
_BROADCAST = frozenset("relax." + n for n in BINARY_OPS + COMPARE_OPS + LOGICAL_OPS)


class ConvertLayout:
    """``IRModule -> IRModule``: the ops named in ``desired_layouts`` compute in the layouts
    given (``{"relax.nn.conv2d": [data, kernel], "relax.nn.max_pool2d": [data]}``), the new
    layout carried through the elementwise ops after them (see the module docstring)."""

    def __init__(self, desired_layouts: dict) -> None:
        self.desired = {}
        for name, layouts in desired_layouts.items():
            full = name if name.startswith("relax.") else "relax." + name
            if full not in _LAYOUT_OPS:
                raise ValueError(f"ConvertLayout: no layout rule for {name}; known: {', '.join(sorted(_LAYOUT_OPS))}")
            layouts = [layouts] if isinstance(layouts, str) else list(layouts)
            wanted = 2 if _LAYOUT_OPS[full][1] else 1
            if len(layouts) != wanted or not all(_plain(lay) for lay in layouts):
                example = ["NHWC", "HWIO"][:wanted]
                raise ValueError(f"ConvertLayout: {name} takes {wanted} unpacked layout(s) such as {example}, "
                                 f"got {layouts}")
            self.desired[full] = layouts

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, lambda bb: _LayoutRewriter(bb, self.desired))

    def __repr__(self) -> str:
        return f"ConvertLayout({self.desired!r})"


def _plain(layout) -> bool:
    """Whether ``layout`` is a string of distinct upper-case axis letters (no packed ``16c``)."""
    return isinstance(layout, str) and layout.isalpha() and layout.isupper() and len(set(layout)) == len(layout)


def _permutation(src: str, dst: str):
    """The ``R.permute_dims`` axes taking a tensor in layout ``src`` to ``dst`` (None when
    ``dst`` is not a reordering of ``src``'s axes)."""
    if sorted(src) != sorted(dst) or not _plain(src):
        return None
    return [src.index(a) for a in dst]


def _ndim(expr) -> int:
    sinfo = relax.struct_info_of(expr)
    return sinfo.ndim if isinstance(sinfo, relax.TensorStructInfo) else -1


class _LayoutRewriter(CallRewriter):
    """One function: walks its blocks binding by binding, keeping for each value it computed in
    another layout the variable that holds it and the two layouts (`_Converted`)."""

    def __init__(self, bb, desired: dict) -> None:
        super().__init__(bb)
        self.desired = desired
        self.converted: dict = {}  # original variable -> _Converted (in the current block)
        self.restored: dict = {}  # original variable -> its value read back in its own layout
        self.permuted: dict = {}  # (variable, layout) -> the variable permuted into it

    def block(self, block: relax.BindingBlock) -> relax.BindingBlock:
        # What a block converts stays in it: a value seen after it is restored where it is
        # bound, and the variables emitted in it are its own.
        self.converted, self.restored, self.permuted = {}, {}, {}
        return super().block(block)

    def binding(self, binding) -> None:
        new = self.convert(binding) if isinstance(binding, relax.VarBinding) else None
        if new is None:
            self.keep(binding)
            return
        self.changed = True
        self.converted[binding.var] = new
        if not isinstance(binding.var, relax.DataflowVar):
            # Seen after the block: the variable keeps its meaning, in its own layout.
            self.bb._block.bindings.append(relax.VarBinding(binding.var, self.bb.normalize(new.restore())))
            self.restored[binding.var] = binding.var

    # ---- bindings left in their layout

    def keep(self, binding) -> None:
        """The binding as it was, reading each converted value it uses in its own layout."""
        used = []
        walk_relax(binding.value, lambda n: used.append(n) if isinstance(n, relax.Var) else None)
        mapping = {v: self.original(v) for v in used if v in self.converted}
        if mapping:
            binding = substitute_relax(binding, mapping)
            self.changed = True
        self.bb._block.bindings.append(binding)

    def original(self, var):
        """``var``'s value in its own layout: a permute back, emitted on first need."""
        if var not in self.restored:
            self.restored[var] = self.bb.emit(self.converted[var].restore())
        return self.restored[var]

    def in_layout(self, expr, src: str, dst: str):
        """``expr`` (in layout ``src`` as the program sees it) in layout ``dst``."""
        done = self.converted.get(expr) if isinstance(expr, relax.Var) else None
        if done is not None and done.src == src and done.dst == dst:
            return done.var
        if done is not None:
            expr = self.original(expr)
        permute = op.permute_dims(expr, axes=_permutation(src, dst))
        if not isinstance(expr, relax.Var):
            return self.bb.emit(permute)
        if (expr, dst) not in self.permuted:  # a weight two convolutions share is permuted once
            self.permuted[expr, dst] = self.bb.emit(permute)
        return self.permuted[expr, dst]

    # ---- bindings converted

    def convert(self, binding: relax.VarBinding):
        """A `_Converted` for the binding's value computed in another layout, or None."""
        call = binding.value
        name = op_name(call)
        if name in _LAYOUT_OPS:
            return self.layout_op(call, name)
        if name in _ELEMENTWISE or name in _BROADCAST:
            return self.elementwise(call)
        return None

    def layout_op(self, call: relax.Call, name: str):
        data_attr, kernel_attr = _LAYOUT_OPS[name]
        src = call.attrs[data_attr]
        out = call.attrs["out_layout"] or src
        data = call.args[0]
        done = self.converted.get(data) if isinstance(data, relax.Var) else None
        if name in self.desired:
            dst = self.desired[name][0]
        elif done is not None and done.src == src and kernel_attr is None:
            dst = done.dst  # a pooling after a converted value pools in its layout
        else:
            return None
        if out != src or dst == src or _permutation(src, dst) is None:
            return None
        attrs = dict(call.attrs)
        attrs[data_attr] = attrs["out_layout"] = dst
        args = [self.in_layout(data, src, dst)]
        if kernel_attr is not None:
            k_src, k_dst = call.attrs[kernel_attr], self.desired[name][1]
            if _permutation(k_src, k_dst) is None:
                return None
            attrs[kernel_attr] = k_dst
            args.append(self.in_layout(call.args[1], k_src, k_dst) if k_src != k_dst else call.args[1])
        args += list(call.args[len(args):])
        return _Converted(self.bb.emit(relax.Call(call.op, args, attrs, call.sinfo_args, span=call.span)), src, dst)

    def elementwise(self, call: relax.Call):
        """An elementwise or broadcasting op on at least one converted operand, in its layout:
        each other operand of the same rank is permuted too, one of lower rank (broadcast from
        the last axes, an ONNX bias ``(C, 1, 1)``) given the leading unit axes first, a scalar
        kept; None if an operand's rank is higher or unknown."""
        first = next((self.converted[a] for a in call.args if isinstance(a, relax.Var) and a in self.converted), None)
        if first is None:
            return None
        rank = len(first.src)
        args = []
        for a in call.args:
            if not isinstance(relax.struct_info_of(a), relax.TensorStructInfo):
                args.append(a)
            elif _ndim(a) == 0:
                args.append(a)
            elif 0 < _ndim(a) <= rank:
                if _ndim(a) < rank:
                    a = self.bb.emit(op.expand_dims(a, axis=list(range(rank - _ndim(a)))))
                args.append(self.in_layout(a, first.src, first.dst))
            else:
                return None
        return _Converted(self.bb.emit(relax.Call(call.op, args, call.attrs, call.sinfo_args, span=call.span)),
                          first.src, first.dst)


class _Converted:
    """A value computed in layout ``dst`` that the program has in layout ``src``: ``var``
    holds it."""

    def __init__(self, var, src: str, dst: str) -> None:
        self.var, self.src, self.dst = var, src, dst

    def restore(self):
        """The call reading it back in ``src``."""
        return op.permute_dims(self.var, axes=_permutation(self.dst, self.src))
