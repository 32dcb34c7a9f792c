"""RewriteAttention: attention written out by hand (two matmuls around a softmax) rewritten
into ``R.nn.attention``.

Why: models often spell attention as ``softmax(mask(Q @ K^T * scale)) @ V`` instead of calling
scaled_dot_product_attention; imported, that is a matmul kernel, a softmax kernel and another
matmul kernel, the whole (batch, heads, seq, seq_kv) score tensor written and read between
them. ``R.nn.attention`` is one op whose CPU kernel never materializes the scores, so the
chain is worth rewriting wherever it can be, as mlc-llm's ``rewrite_attention`` does with TVM's
pattern language (TVM itself has no such pass).

What it rewrites, in a function's bindings, each intermediate used only once:

    s = matmul(Q, KT)                Q (b, h, n, d), KT (b, h, d, m) a transposed K
    s = multiply(s, c) | divide(s, c)   optional, c a scalar constant: scale c (or 1/c), else 1
    s = where(mask, -inf, s) | where(keep, s, -inf) | add(s, bias)   optional
    p = softmax(s, axis=-1)
    o = matmul(p, V)                 V (b, h, m, dv)

into ``o = permute_dims(nn.attention(Q', K', V', scale=..., causal_mask=...), [0, 2, 1, 3])``,
where Q', K', V' are the (b, seq, h, d) tensors: a permute_dims chain that composes to the
wanted layout is looked through (``Q = permute_dims(X, [0, 2, 1, 3])`` gives X), otherwise a
permute_dims is inserted. A constant boolean mask that is exactly the upper triangle (``[i, j]``
masked when ``j > i``) becomes ``causal_mask="TopLeft"`` (``j > i + m - n``: "BottomRight"),
also when it is a constant compared with a scalar and sliced by ``take(arange(0, T, 1))`` from
index 0 on its last two axes (a dynamic length's ``mask[:, :, :T, :T] == 0``): the values are
checked, not assumed. Any other mask becomes the additive bias ``where(mask, -inf, 0)``
(``nn.attention_bias``), as does an added bias, when it is (b | 1, h | 1, n | 1, m) shaped.
Key and value heads must be the query's or 1 (matmul broadcasting is grouped-query attention
with one group).

Afterwards a permute_dims of a permute_dims is composed into one (`ComposePermutes`), and
disappears when the two undo each other: the ``permute_dims(o, [0, 2, 1, 3])`` a model writes
after the second matmul then reads the attention's output itself.
"""

from __future__ import annotations

import numpy as np

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.op import api as op

from ._common import known_shape, op_name, same_dim, same_shape, var_use_counts
from ._rewrite_calls import CallRewriter, rewrite_functions
from .dead_code_elimination import remove_unused_bindings

BSHD = [0, 2, 1, 3]  # (b, h, s, d) <-> (b, s, h, d): its own inverse
_KEY_FROM_TRANSPOSED = [0, 3, 1, 2]  # (b, h, d, m) -> (b, m, h, d)
_MASK_LIMIT = 1 << 24  # constant masks evaluated in NumPy up to this many elements
_COMPARE = {"relax.equal": np.equal, "relax.not_equal": np.not_equal, "relax.less": np.less,
            "relax.less_equal": np.less_equal, "relax.greater": np.greater,
            "relax.greater_equal": np.greater_equal}


class RewriteAttention:
    """``IRModule -> IRModule``: hand-written attention chains as ``R.nn.attention``."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return ComposePermutes()(rewrite_functions(mod, _AttentionRewriter))

    def __repr__(self) -> str:
        return "RewriteAttention()"


class ComposePermutes:
    """``IRModule -> IRModule``: ``permute_dims(permute_dims(x, p), q)`` as one permute_dims of
    ``x``, or ``x`` itself when the two cancel."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, _PermuteComposer)

    def __repr__(self) -> str:
        return "ComposePermutes()"


def _shape(expr):
    """The dims of a tensor's shape (ints or symbolic), or None when it is not known."""
    sinfo = relax.struct_info_of(expr)
    return list(sinfo.shape) if known_shape(sinfo) else None


def _same_shape(a, b) -> bool:
    return same_shape(relax.struct_info_of(a), relax.struct_info_of(b))


def _dtype(expr) -> str:
    return relax.struct_info_of(expr).dtype


def _axes(call: relax.Call, ndim: int) -> list:
    axes = call.attrs["axes"]
    return list(range(ndim))[::-1] if axes is None else [int(a) % ndim for a in axes]


def _scalar(expr):
    """The value of a constant holding one element, else None."""
    if isinstance(expr, relax.Constant) and expr.data.size == 1:
        return expr.data.reshape(()).item()
    return None


def _is_neg_inf(expr) -> bool:
    value = _scalar(expr)
    return isinstance(value, float) and value == float("-inf")


class _Rewriter(CallRewriter):
    """A CallRewriter that knows each variable's value and uses, and the block it is bound in
    (a DataflowVar may only be read in its own block); bindings left unused go afterwards."""

    def function(self, func: relax.Function) -> relax.Function:
        self.uses = var_use_counts(func.body)
        self.values, self.block_of = {}, {}
        for block in func.body.blocks:
            for b in block.bindings:
                self.values[b.var], self.block_of[b.var] = b.value, block
        new = super().function(func)
        return new if new is func else remove_unused_bindings(new)

    def block(self, block):
        self.current = block
        return super().block(block)

    def value(self, expr):
        return self.values.get(expr) if isinstance(expr, relax.Var) else None

    def visible(self, expr) -> bool:
        return not isinstance(expr, relax.DataflowVar) or self.block_of.get(expr) is self.current

    def only_use(self, expr, name: str):
        """The call ``expr`` is bound to when it is an op ``name`` and ``expr`` has no other use."""
        value = self.value(expr)
        return value if op_name(value) == name and self.uses.get(expr) == 1 else None

    def source_of(self, expr, perm: list):
        """A variable equal to ``permute_dims(expr, perm)`` found along the permute_dims chain
        ``expr`` is bound to, or None."""
        while True:
            if perm == sorted(perm):
                return expr if self.visible(expr) else None
            value = self.value(expr)
            if op_name(value) != "relax.permute_dims":
                return None
            inner = _axes(value, len(perm))
            perm, expr = [inner[i] for i in perm], value.args[0]


class _PermuteComposer(_Rewriter):
    def rule(self, call):
        if op_name(call) != "relax.permute_dims" or _shape(call.args[0]) is None:
            return None
        inner = self.value(call.args[0])
        if op_name(inner) != "relax.permute_dims" or not self.visible(inner.args[0]):
            return None
        ndim = len(_shape(call.args[0]))
        p, q = _axes(inner, ndim), _axes(call, ndim)
        composed = [p[i] for i in q]
        source = inner.args[0]
        return lambda bb, _: source if composed == sorted(composed) else op.permute_dims(source, composed)


class _AttentionRewriter(_Rewriter):
    def flattens(self, arg) -> bool:
        return False  # a chain's links are bindings of their own: nested calls are no chain

    def rule(self, call):
        if op_name(call) != "relax.matmul":
            return None
        return lambda bb, c: self.rewrite(bb, c)

    def rewrite(self, bb, call):
        chain = self.match(call)
        if chain is None:
            return None
        q, k, v, scale, causal, bias = chain
        q, k, v = (self.as_bshd(bb, x, perm) for x, perm in ((q, BSHD), (k, _KEY_FROM_TRANSPOSED), (v, BSHD)))
        if bias is not None:
            bias = bb.emit(bias)
        out = bb.emit(op.nn.attention(q, k, v, bias, scale=scale, causal_mask=causal))
        return op.permute_dims(out, BSHD)

    def as_bshd(self, bb, expr, perm):
        source = self.source_of(expr, perm)
        return source if source is not None else bb.emit(op.permute_dims(expr, perm))

    def match(self, call):
        """``(Q, KT, V, scale, causal_mask, bias expression)`` of the chain ending in ``call``,
        or None."""
        probs, v = call.args
        softmax = self.only_use(probs, "relax.nn.softmax")
        if softmax is None or softmax.attrs["axis"] not in (-1, 3):
            return None
        scaled, mask = self.mask_stage(softmax.args[0])
        scores, scale = self.scale_stage(scaled)
        qk = self.only_use(scores, "relax.matmul")
        if qk is None or not _result_dtype_kept(qk) or not _result_dtype_kept(call):
            return None
        q, kt = qk.args
        if not all(self.visible(x) for x in (q, kt, v)):
            return None
        shapes = [_shape(x) for x in (q, kt, v)]
        dtypes = {_dtype(x) for x in (q, kt, v)}
        if any(s is None or len(s) != 4 for s in shapes) or len(dtypes) != 1 or "float" not in _dtype(q):
            return None
        if not _heads_match(*shapes):
            return None
        m = shapes[1][3]  # the keys' sequence length
        causal, bias = (None, None) if mask is None else self.mask_kind(mask, shapes[0], m, _dtype(q))
        if mask is not None and causal is None and bias is None:
            return None
        return q, kt, v, scale, causal, bias

    def mask_stage(self, logits):
        """``(scaled scores, mask)`` where the mask is ``("masked" | "kept" | "bias", expr)``
        or None when there is no mask stage."""
        where = self.only_use(logits, "relax.where")
        if where is not None:
            cond, a, b = where.args
            if _is_neg_inf(a) and isinstance(b, relax.Var) and _same_shape(b, logits):
                return b, ("masked", cond)
            if _is_neg_inf(b) and isinstance(a, relax.Var) and _same_shape(a, logits):
                return a, ("kept", cond)
        add = self.only_use(logits, "relax.add")
        if add is not None:
            for s, bias in (add.args, add.args[::-1]):
                if self.leads_to_scores(s) and _same_shape(s, logits):
                    return s, ("bias", bias)
        return logits, None

    def leads_to_scores(self, expr) -> bool:
        return any(self.only_use(expr, name) is not None for name in ("relax.matmul", "relax.multiply",
                                                                        "relax.divide"))

    def scale_stage(self, scaled):
        """``(scores, scale)``: a multiplication or division by a scalar constant looked
        through, else scale 1."""
        for name, invert in (("relax.multiply", False), ("relax.divide", True)):
            call = self.only_use(scaled, name)
            if call is None:
                continue
            pairs = [call.args] if invert else [call.args, call.args[::-1]]
            for scores, c in pairs:
                value = _scalar(c)
                if isinstance(value, float) and value != 0 and _same_shape(scores, scaled):
                    return scores, (1.0 / value if invert else value)
        return scaled, 1.0

    def mask_kind(self, mask, q_shape, m, dtype):
        """``(causal_mask, None)`` for a causal mask, ``(None, bias expression)`` for another
        one that broadcasts as a bias, or ``(None, None)``."""
        kind, expr = mask
        if kind == "bias":
            return (None, expr) if _bias_fits(expr, q_shape, m, dtype) and self.visible(expr) else (None, None)
        causal = _causal_kind(self.mask_values(expr), _shape(expr), q_shape[2], m, kind == "masked")
        if causal is not None:
            return causal, None
        if relax.struct_info_of(expr).dtype != "bool" or not self.visible(expr):
            return None, None
        masked, kept = op.const(float("-inf"), dtype), op.const(0.0, dtype)
        bias = op.where(expr, masked, kept) if kind == "masked" else op.where(expr, kept, masked)
        return (None, bias) if _bias_fits(bias, q_shape, m, dtype) else (None, None)

    def mask_values(self, expr):
        """``(values, sliced axes)`` of a mask computed from one constant: elementwise
        comparisons with scalars and ``logical_not`` evaluated in NumPy, ``take(x,
        arange(0, T, 1), axis)`` (the first T along ``axis``) recorded as a sliced axis; None
        for anything else."""
        if isinstance(expr, relax.Constant):
            return (expr.data, frozenset()) if expr.data.size <= _MASK_LIMIT else None
        value = self.value(expr)
        if not isinstance(value, relax.Call) or not isinstance(value.op, relax.Op):
            return None
        name = value.op.name
        if name == "relax.logical_not":
            inner = self.mask_values(value.args[0])
            return None if inner is None else (np.logical_not(inner[0]), inner[1])
        if name in _COMPARE:
            a, b = value.args
            if _scalar(b) is not None:
                inner = self.mask_values(a)
                return None if inner is None else (_COMPARE[name](inner[0], _scalar(b)), inner[1])
            if _scalar(a) is not None:
                inner = self.mask_values(b)
                return None if inner is None else (_COMPARE[name](_scalar(a), inner[0]), inner[1])
            return None
        if name == "relax.take" and self.is_prefix_range(value.args[1]):
            inner = self.mask_values(value.args[0])
            ndim = len(_shape(value) or ())
            if inner is None or value.attrs["axis"] is None or ndim == 0:
                return None
            return inner[0], inner[1] | {int(value.attrs["axis"]) % ndim}
        return None

    def is_prefix_range(self, expr) -> bool:
        """Whether ``expr`` is bound to ``arange(0, T, 1)`` (T anything)."""
        value = self.value(expr)
        if op_name(value) != "relax.arange" or len(value.args) != 3:
            return False
        start, _, step = value.args
        return _prim_int(start) == 0 and _prim_int(step) == 1


def _prim_int(expr):
    if isinstance(expr, relax.PrimValue) and isinstance(expr.value, tir.IntImm):
        return int(expr.value.value)
    return None


def _result_dtype_kept(matmul: relax.Call) -> bool:
    return matmul.attrs["out_dtype"] in ("void", "", None, _dtype(matmul.args[0]))


def _heads_match(q, kt, v) -> bool:
    """Batch sizes equal, key and value heads the query's or 1 (matmul broadcasting), the
    key's and value's sequence lengths and the head dimensions equal."""
    (b, h, _, d), (bk, hk, dk, m), (bv, hv, mv, _) = q, kt, v
    one = lambda x: isinstance(x, tir.IntImm) and x.value == 1  # noqa: E731
    return (same_dim(b, bk) and same_dim(b, bv) and same_dim(d, dk) and same_dim(m, mv)
            and same_dim(hk, hv) and (same_dim(h, hk) or one(hk)))


def _bias_fits(bias, q_shape, m, dtype) -> bool:
    """nn.attention_bias's bias: (b | 1, h | 1, n | 1, m), the query's dtype."""
    shape = _shape(bias)
    if shape is None or len(shape) != 4 or _dtype(bias) != dtype or not same_dim(shape[3], m):
        return False
    one = lambda x: isinstance(x, tir.IntImm) and x.value == 1  # noqa: E731
    return all(one(s) or same_dim(s, want) for s, want in zip(shape[:3], q_shape[:1] + [q_shape[1], q_shape[2]]))


def _causal_kind(values, mask_shape, n, m, true_masks: bool):
    """"TopLeft" or "BottomRight" when a mask's values hide exactly the keys after the query
    (``j > i``, or ``j > i + m - n``) on every leading index, else None. A mask sliced from 0
    on its last two axes is causal TopLeft for every length when the whole constant is."""
    if values is None or mask_shape is None or len(mask_shape) < 2:
        return None
    data, sliced = values
    rank = len(mask_shape)
    if data.dtype != np.bool_ or data.ndim != rank or not sliced <= {rank - 2, rank - 1}:
        return None
    if not (same_dim(mask_shape[-2], n) and same_dim(mask_shape[-1], m)):
        return None
    hidden = data if true_masks else np.logical_not(data)
    rows, cols = hidden.shape[-2:]
    if np.array_equal(hidden, np.broadcast_to(np.triu(np.ones((rows, cols), bool), 1), hidden.shape)):
        return "TopLeft"
    if not sliced and rows != cols and np.array_equal(
            hidden, np.broadcast_to(np.triu(np.ones((rows, cols), bool), 1 + cols - rows), hidden.shape)):
        return "BottomRight"
    return None
