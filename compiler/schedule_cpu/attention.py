"""Attention as one flash-structured loop nest (`flash_attention`): the chain of
``T_batch_matmul_NT``, scale, bias, mask, softmax and ``T_batch_matmul_NN`` that
``topi.nn.attention`` legalizes to (recognized by `attention_match.match_attention`) is
replaced by one nest that never materializes the ``(batch, heads, seq, seq_kv)`` scores::

    for t in parallel(batch * heads * query_blocks):        # b, h, query block i0
        m[r] = -max_float; l[r] = 0; acc[r, e] = 0            # r < BLOCK_Q
        qt[d, r] = Q[b, i0 + r, d]                            # packed transposed, once
        for kb < key blocks (causal: up to the block with the last visible key):
            s[c, r] = sum_d K[b, j0 + c, d] * qt[d, r]        # c < BLOCK_K; vectors along r
            s[c, r] = visible ? logit(s[c, r]) : -max_float   # scale, bias, mask
            m'[r] = max(m[r], max_c s[c, r]); alpha[r] = exp(m[r] - m'[r]); m[r] = m'[r]
            s[c, r] = visible ? exp(s[c, r] - m'[r]) : 0; l[r] = l[r] * alpha[r] + sum_c s[c, r]
            acc[r, e] = acc[r, e] * alpha[r] + sum_c s[c, r] * V[b, j0 + c, e]   # vectors along e
        O[b, i0 + r, e] = l[r] > 0 ? acc[r, e] / l[r] : 0

The score block is key-major so that the row statistics (maximum, sum, rescaling) are vectors
along the query rows, never horizontal reductions (a row maximum as a scalar chain took most
of the time). Both products are register tiles (accumulators in registers over ``d`` or over
the keys, as `register_tile` builds for a matrix multiply).

The online softmax (Milakov and Gimelshein; Dao et al.'s FlashAttention) rescales what was
accumulated for earlier key blocks by ``exp(m_old - m_new)`` whenever the row maximum grows, so
the result is softmax(logits) . V up to rounding (the sums are added in another order, the
division comes after the product with V). The score block (BLOCK_K x BLOCK_Q), the packed queries
(head_dim x BLOCK_Q) and the accumulators (BLOCK_Q x head_dim_v) stay in L1/L2 while a query
block sweeps the keys; the unfused chain sweeps the whole score tensor six times.

Tails need no separate code: rows past ``seq`` read the last query row (``min``) and are not
stored; keys past ``seq_kv`` read the last key (``min``) and are masked out like keys a causal
mask hides. Masked scores are ``-max_float``, not ``-inf``, and the running maximum starts
there, so ``exp`` never sees ``inf - inf``; a row with no visible key (a causal BottomRight
mask with more queries than keys) gets 0, where the unfused chain divides 0 by 0. Under a
causal mask of the form ``j <= i + offset``, key blocks wholly above the diagonal of a query
block are not visited."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Optional

import numpy as np

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import INTERLEAVE_ANN, VECTORIZE_ANN
from .attention_match import AttentionChain, match_attention
from .host import vector_bytes, vector_registers

BLOCK_Q = 32  # query rows per block: with BLOCK_K, an 8 KiB score block
BLOCK_K = 64  # keys per block: the score row's vector loop, and the packed keys' width
FLASH_BLOCK = "flash_attention"  # the name of the block holding a query block's buffers

# False: attention chains keep the generic per-stage schedule (benchmarks compare the two; a
# build made so must not come from, or go to, the build cache: ``use_cache=False``).
flash_enabled: ContextVar[bool] = ContextVar("tvms_flash_attention", default=True)


def flash_attention(func: tir.PrimFunc) -> Optional[tir.Stmt]:
    """The body of ``func`` as one flash-attention nest, or None when ``func`` is not an
    attention chain (`match_attention`)."""
    chain = match_attention(func) if flash_enabled.get() else None
    if chain is None:
        return None
    return _FlashBuilder(chain).build()


def _i64(v: int) -> tir.IntImm:
    return tir.IntImm("int64", v)


def _add(a, b):
    return tir.Add("int64", a, b)


def _mul(a, b):
    return tir.Mul("int64", a, b)


def _min(a, b):
    return tir.Min("int64", a, b)


def _floordiv(a, b):
    return tir.FloorDiv("int64", a, b)


def _as_i64(e):
    return e if e.dtype == "int64" else tir.Cast("int64", e)


def _loop(var: tir.Var, extent, body, vector: int = 0, kind: str = "serial", vectors: int = 1) -> tir.For:
    """A loop from 0; ``vector``: vectorized at that width, ``vectors`` vectors an iteration."""
    ext = _i64(extent) if isinstance(extent, int) else extent
    ann = {}
    if vector > 1:
        ann = {VECTORIZE_ANN: vector, INTERLEAVE_ANN: vectors} if vectors > 1 else {VECTORIZE_ANN: vector}
    elif vector == 1:
        ann = {VECTORIZE_ANN: 1}  # (LLVM would vectorize a transposing copy with scatters)
    return tir.For(var, _i64(0), ext, kind, body, annotations=ann)


class _FlashBuilder:
    """Builds the nest of the module docstring for one `AttentionChain`. The score block is
    kept key-major (``s[c, r]``), so every per-row quantity (running maximum, sum, rescaling
    factor) is a vector along the query rows: no horizontal reductions."""

    def __init__(self, chain: AttentionChain) -> None:
        self.c = chain
        dt = chain.dtype
        self.dt = dt
        self.lanes = max(1, vector_bytes() // np.dtype(dt).itemsize)
        self.lowest = tir.FloatImm(dt, float(np.finfo(dt).min))
        self.seq, self.seq_kv = _as_i64(chain.seq), _as_i64(chain.seq_kv)

        def local(name, *shape):
            return tir.Buffer(f"flash_{name}", [_i64(x) for x in shape], dt, scope="local")

        self.qt = local("qt", chain.head_dim, BLOCK_Q)  # the query block, transposed
        self.s = local("s", BLOCK_K, BLOCK_Q)  # scores, then probabilities, key-major
        self.acc = local("acc", BLOCK_Q, chain.head_dim_v)
        self.m, self.l, self.alpha = local("m", BLOCK_Q), local("l", BLOCK_Q), local("alpha", BLOCK_Q)
        self.m_new, self.row_sum = local("m_new", BLOCK_Q), local("row_sum", BLOCK_Q)
        self.key_rows = _tile_rows(BLOCK_K, BLOCK_Q, self.lanes)
        self.value_rows = _tile_rows(BLOCK_Q, chain.head_dim_v, self.lanes)
        self.score_tile = local("s_tile", self.key_rows, BLOCK_Q)
        self.value_tile = local("acc_tile", self.value_rows, chain.head_dim_v)
        names = ("t", "kb", "r", "rt", "rr", "c", "dd", "ee")
        self.t, self.kb, self.r, self.rt, self.rr, self.cc, self.dd, self.ee = (tir.Var("int64", n) for n in names)

    # ---- indices
    def _blocks(self, extent, block: int):
        return _floordiv(_add(extent, _i64(block - 1)), _i64(block))

    def _query_blocks(self):
        return self._blocks(self.seq, BLOCK_Q)

    def _coords(self) -> tuple:
        """``(b, h, i0)`` of the parallel iteration ``t``."""
        c, qb = self.c, self._query_blocks()
        heads = _as_i64(c.heads)
        b = _floordiv(self.t, _mul(heads, qb))
        h = tir.FloorMod("int64", _floordiv(self.t, qb), heads)
        i0 = _mul(tir.FloorMod("int64", self.t, qb), _i64(BLOCK_Q))
        return b, h, i0

    def _row(self, i0, r):
        """The query row of block row ``r`` (the last row for the rows past ``seq``)."""
        return _min(_add(i0, r), _add(self.seq, _i64(-1)))

    def _key(self, c):
        """The key of ``c`` in block ``kb``, unclamped (for the mask)."""
        return _add(_mul(self.kb, _i64(BLOCK_K)), c)

    def _key_read(self, c):
        """The key of ``c`` in bounds (the last key for the keys past ``seq_kv``)."""
        return _min(self._key(c), _add(self.seq_kv, _i64(-1)))

    def _at(self, e, b, h, i, j, d=None, e_=None):
        """``e`` (in the canonical iterators) at these values (None: an iterator it does not read)."""
        c = self.c
        pairs = ((c.b, b), (c.h, h), (c.i, i), (c.j, j), (c.d, d), (c.e, e_))
        return substitute(e, {var: value for var, value in pairs if value is not None})

    def _visible(self, b, h, i, c):
        """Whether key ``c`` of block ``kb`` is visible to row ``i``: in bounds and unmasked."""
        key = self._key(c)
        inside = tir.LT("bool", key, self.seq_kv)
        if self.c.visible is None:
            return inside
        return tir.And("bool", inside, self._at(self.c.visible, b, h, i, key))

    def _key_blocks(self, i0):
        """Key blocks a query block visits: all, or under ``j <= i + offset`` those up to the
        block of the last row's last visible key."""
        every = self._blocks(self.seq_kv, BLOCK_K)
        offset = _causal_offset(self.c)
        if offset is None:
            return every
        last_row = _min(_add(i0, _i64(BLOCK_Q - 1)), _add(self.seq, _i64(-1)))
        needed = _add(_floordiv(_add(last_row, _as_i64(offset)), _i64(BLOCK_K)), _i64(1))
        return tir.Max("int64", _i64(0), _min(every, needed))

    def _rows_vector(self) -> dict:
        return _vector_loop(BLOCK_Q, self.lanes)

    # ---- the nest
    def build(self) -> tir.Stmt:
        c, dt = self.c, self.dt
        b, h, i0 = self._coords()
        r, ee = self.r, self.ee
        start = tir.seq([
            _loop(r, BLOCK_Q, tir.seq([tir.BufferStore(self.m, self.lowest, [r]),
                                       tir.BufferStore(self.l, tir.const(0, dt), [r])]), **self._rows_vector()),
            _loop(r, BLOCK_Q, _loop(ee, c.head_dim_v, tir.BufferStore(self.acc, tir.const(0, dt), [r, ee]),
                                    **_vector_loop(c.head_dim_v, self.lanes))),
            self._pack_queries(b, h, i0)])
        sweep = _loop(self.kb, self._key_blocks(i0), tir.seq([
            self._scores(b, h, i0), self._softmax_step(b, h, i0), self._weighted_values(b, h, i0)]))
        finish = self._store(b, h, i0)
        buffers = [self.qt, self.s, self.acc, self.m, self.l, self.alpha, self.m_new, self.row_sum,
                   self.score_tile, self.value_tile]
        block = tir.Block(FLASH_BLOCK, [], [], [], tir.seq([start, sweep, finish]), alloc_buffers=buffers)
        count = _mul(_mul(_as_i64(c.batch), _as_i64(c.heads)), self._query_blocks())
        return _loop(self.t, count, tir.BlockRealize([], tir.IntImm("bool", 1), block), kind="parallel")

    def _pack_queries(self, b, h, i0) -> tir.Stmt:
        """``qt[d, r] = Q[row r, d]``: the query block transposed, once per query block, so a
        score tile is a vector loop along the rows."""
        r, dd = self.r, self.dd
        q = self._at(self.c.q, b, h, self._row(i0, r), None, d=dd)
        return _loop(r, BLOCK_Q, _loop(dd, self.c.head_dim, tir.BufferStore(self.qt, q, [dd, r]), vector=1))

    def _scores(self, b, h, i0) -> tir.Stmt:
        """``s[c, r] = logit(sum_d K[key c, d] * qt[d, r])`` where key ``c`` is visible to row
        ``r``, else the lowest float: a register tile of `key_rows` keys x BLOCK_Q rows
        accumulated over ``d``, vectorized along the rows."""
        c, r, dd, dt, rt, rr = self.c, self.r, self.dd, self.dt, self.rt, self.rr
        keys, vec = self.key_rows, self._rows_vector()
        key = _add(_mul(rt, _i64(keys)), rr)
        i = self._row(i0, r)
        tile, cell = self.score_tile, [rr, r]
        acc = tir.BufferLoad(dt, tile, cell)
        k = self._at(c.k, b, h, None, self._key_read(key), d=dd)
        fma = tir.BufferStore(tile, tir.Add(dt, acc, tir.Mul(dt, k, tir.BufferLoad(dt, self.qt, [dd, r]))), cell)
        logit = self._at(substitute(c.logit, {c.score: acc}), b, h, i, self._key_read(key))
        masked = tir.Select(dt, self._visible(b, h, i, key), logit, self.lowest)
        steps = [
            _loop(rr, keys, _loop(r, BLOCK_Q, tir.BufferStore(tile, tir.const(0, dt), cell), **vec), kind="unroll"),
            _loop(dd, c.head_dim, _loop(rr, keys, _loop(r, BLOCK_Q, fma, **vec), kind="unroll")),
            _loop(rr, keys, _loop(r, BLOCK_Q, tir.BufferStore(self.s, masked, [key, r]), **vec), kind="unroll"),
        ]
        return _loop(rt, BLOCK_K // keys, tir.seq(steps))

    def _softmax_step(self, b, h, i0) -> tir.Stmt:
        """For all rows at once (vectors along ``r``): the new running maximum, ``alpha =
        exp(m_old - m_new)``, the block's probabilities (relative to ``m_new``) in place of its
        logits, and the running sum."""
        r, cc, dt = self.r, self.cc, self.dt
        cell, vec = [cc, r], self._rows_vector()
        s = tir.BufferLoad(dt, self.s, cell)
        m_new = tir.BufferLoad(dt, self.m_new, [r])
        m_old = tir.BufferLoad(dt, self.m, [r])
        row_sum = tir.BufferLoad(dt, self.row_sum, [r])
        exp = tir.Call(dt, "tir.exp", [tir.Sub(dt, s, m_new)])
        visible = self._visible(b, h, self._row(i0, r), cc)
        alpha = tir.BufferLoad(dt, self.alpha, [r])
        return tir.seq([
            _loop(r, BLOCK_Q, tir.seq([tir.BufferStore(self.m_new, m_old, [r]),
                                       tir.BufferStore(self.row_sum, tir.const(0, dt), [r])]), **vec),
            _loop(cc, BLOCK_K, _loop(r, BLOCK_Q, tir.BufferStore(self.m_new, tir.Max(dt, m_new, s), [r]), **vec)),
            _loop(r, BLOCK_Q, tir.seq([
                tir.BufferStore(self.alpha, tir.Call(dt, "tir.exp", [tir.Sub(dt, m_old, m_new)]), [r]),
                tir.BufferStore(self.m, m_new, [r])]), **vec),
            _loop(cc, BLOCK_K, _loop(r, BLOCK_Q, tir.seq([
                tir.BufferStore(self.s, tir.Select(dt, visible, exp, tir.const(0, dt)), cell),
                tir.BufferStore(self.row_sum, tir.Add(dt, row_sum, s), [r])]), **vec)),
            _loop(r, BLOCK_Q, tir.BufferStore(
                self.l, tir.Add(dt, tir.Mul(dt, tir.BufferLoad(dt, self.l, [r]), alpha), row_sum), [r]), **vec),
        ])

    def _weighted_values(self, b, h, i0) -> tir.Stmt:
        """``acc[r, e] = acc[r, e] * alpha[r] + sum_c s[c, r] * V[key c, e]`` over the keys
        before ``seq_kv``: a register tile of `value_rows` rows x head_dim_v, vectorized
        along ``e``."""
        c, cc, ee, dt, rt, rr = self.c, self.cc, self.ee, self.dt, self.rt, self.rr
        rows, vec = self.value_rows, _vector_loop(c.head_dim_v, self.lanes)
        r = _add(_mul(rt, _i64(rows)), rr)
        tile, cell = self.value_tile, [rr, ee]
        acc = tir.BufferLoad(dt, tile, cell)
        value = self._at(c.v, b, h, self._row(i0, r), self._key(cc), e_=ee)
        fma = tir.BufferStore(tile, tir.Add(dt, acc, tir.Mul(dt, tir.BufferLoad(dt, self.s, [cc, r]), value)), cell)
        valid = _min(_i64(BLOCK_K), _add(self.seq_kv, _mul(self.kb, _i64(-BLOCK_K))))
        rescaled = tir.Mul(dt, tir.BufferLoad(dt, self.acc, [r, ee]), tir.BufferLoad(dt, self.alpha, [r]))
        steps = [
            _loop(rr, rows, _loop(ee, c.head_dim_v, tir.BufferStore(tile, rescaled, cell), **vec), kind="unroll"),
            _loop(cc, valid, _loop(rr, rows, _loop(ee, c.head_dim_v, fma, **vec), kind="unroll")),
            _loop(rr, rows, _loop(ee, c.head_dim_v, tir.BufferStore(self.acc, acc, [r, ee]), **vec), kind="unroll"),
        ]
        return _loop(rt, BLOCK_Q // rows, tir.seq(steps))

    def _store(self, b, h, i0) -> tir.Stmt:
        """``O[row r, e] = acc[r, e] / l[r]`` for the rows before ``seq`` (0 where no key was
        visible)."""
        c, r, ee, dt = self.c, self.r, self.ee, self.dt
        i = _add(i0, r)
        l_r = tir.BufferLoad(dt, self.l, [r])
        value = tir.Select(dt, tir.GT("bool", l_r, tir.const(0, dt)),
                           tir.Div(dt, tir.BufferLoad(dt, self.acc, [r, ee]), l_r), tir.const(0, dt))
        indices = [self._at(ix, b, h, i, None, e_=ee) for ix in c.out_indices]
        store = _loop(ee, c.head_dim_v, tir.BufferStore(c.out, value, indices), **_vector_loop(c.head_dim_v, self.lanes))
        return _loop(r, BLOCK_Q, tir.IfThenElse(tir.LT("bool", i, self.seq), store))


def _vector_loop(extent: int, lanes: int) -> dict:
    """`_loop`'s arguments for a loop of ``extent`` vectorized whole: the widest power of two
    up to ``lanes`` dividing it, as many vectors an iteration as fill it."""
    width = lanes
    while extent % width:
        width //= 2
    return {"vector": width, "vectors": extent // width}


def _tile_rows(rows: int, width: int, lanes: int) -> int:
    """Rows of a register tile ``rows`` long and ``width`` wide: as many as fill half the
    vector registers with accumulators (a power of two dividing ``rows``)."""
    fit = max(1, vector_registers() // 2 // max(1, -(-width // lanes)))
    out = 1
    while out * 2 <= fit and rows % (out * 2) == 0:
        out *= 2
    return out


def _causal_offset(chain: AttentionChain):
    """``offset`` when the mask is ``j <= i + offset`` (``offset`` reading neither), else None."""
    cond = chain.visible
    if not isinstance(cond, tir.LE) or cond.a is not chain.j:
        return None
    rhs = cond.b
    if rhs is chain.i:
        return tir.IntImm(chain.i.dtype, 0)
    if isinstance(rhs, tir.Add) and rhs.a is chain.i and not {chain.i, chain.j} & set(vars_in([rhs.b])):
        return rhs.b
    return None
