"""Recognizes scaled dot-product attention in a PrimFunc (`match_attention`): the stage chain
``topi.nn.attention`` legalizes to, read structurally, not by block names:

* scores ``S[b, h, i, j] = sum_d Q(...) * K(...)`` (``T.init`` 0), ``Q`` not reading ``j``,
  ``K`` not reading ``i``;
* any number of elementwise stages on the scores, each reading the one before at the same
  element (the scale, a bias);
* softmax along ``j`` in its four stages (row maximum, ``exp(x - max)``, row sum, division),
  the maximum and the exp optionally under the same mask ``visible(b, h, i, j)`` (causal);
* ``O[...] = sum_j P[b, h, i, j] * V(...)`` (``T.init`` 0), the function's output.

What the chain computes comes out as an `AttentionChain`: every access and expression in terms
of four canonical iterators (batch ``b``, head ``h``, query ``i``, key ``j``) plus the head
dimension iterators ``d`` (of ``Q``/``K``) and ``e`` (of ``V`` and the output), so grouped-query
head maps (``h // 2``), broadcast bias indices and symbolic extents come along unchanged. A
function with anything else in it (an epilogue fused after the chain, another stage) is not
matched and keeps the generic schedule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.structural import structural_equal
from tvmscript.ir.tir_visitor import contains, vars_in

from .analysis import buffer_loads
from .block_edits import replaced_loads
from .nest import perfect_nest

_FLOAT_DTYPES = ("float32", "float64")


@dataclass
class AttentionChain:
    """What an attention chain computes, in the canonical iterators `b, h, i, j, d, e`.

    ``q``, ``k``: the loads of the score sum (in ``b, h, i, d`` and ``b, h, j, d``); ``v``: the
    load of the value sum (in ``b, h, j, e``); ``out``/``out_indices``: the output buffer and
    the indices stored (in ``b, h, i, e``); ``logit``: the scaled (biased) score as an expression
    of the raw score `score` and the iterators; ``visible``: the mask condition (None: every key
    visible); extents of the score tensor (``batch, heads, seq, seq_kv``) and of the head
    dimensions (``head_dim``, ``head_dim_v``, constants)."""

    b: tir.Var
    h: tir.Var
    i: tir.Var
    j: tir.Var
    d: tir.Var
    e: tir.Var
    score: tir.Var
    q: tir.BufferLoad
    k: tir.BufferLoad
    v: tir.BufferLoad
    out: tir.Buffer
    out_indices: list
    logit: tir.PrimExpr
    visible: Optional[tir.PrimExpr]
    batch: tir.PrimExpr
    heads: tir.PrimExpr
    seq: tir.PrimExpr
    seq_kv: tir.PrimExpr
    head_dim: int
    head_dim_v: int
    dtype: str


@dataclass
class _Stage:
    """One loop nest's block: its store, init, and block iterators by kind."""

    block: tir.Block
    store: tir.BufferStore
    init: Optional[tir.BufferStore]
    spatial: list
    reduce: list
    extents: dict  # block iterator -> extent


def match_attention(func: tir.PrimFunc) -> Optional[AttentionChain]:
    """The attention chain ``func`` is made of, or None (see the module docstring)."""
    stages = _stages(func)
    if stages is None or len(stages) < 7:
        return None
    out_buf = func.buffer_map.get(func.params[-1]) if func.params else None
    try:
        return _read_chain(stages, out_buf, set(func.buffer_map.values()))
    except _NoMatch:
        return None


class _NoMatch(Exception):
    pass


def _require(cond) -> None:
    if not cond:
        raise _NoMatch


def _stages(func: tir.PrimFunc) -> Optional[list]:
    """The root block's loop nests as `_Stage`s, or None when it holds anything else."""
    root = func.body
    if not isinstance(root, tir.BlockRealize) or root.block.init is not None or root.block.match_buffers:
        return None
    body = root.block.body
    stages = []
    for stmt in body.seq if isinstance(body, tir.SeqStmt) else [body]:
        stage = _stage(stmt) if isinstance(stmt, tir.For) else None
        if stage is None:
            return None
        stages.append(stage)
    return stages


def _stage(top: tir.For) -> Optional[_Stage]:
    """The nest under ``top`` when it is serial loops from 0 around one block whose iterators
    are bound to those loops, one each, and whose body is one store; else None."""
    loops, realize = perfect_nest(top)
    if realize is None or len(loops) != len(realize.iter_values):
        return None
    if any(lp.kind != "serial" or lp.annotations or not tir.is_const_int(lp.min, 0) for lp in loops):
        return None
    block = realize.block
    if not tir.is_const_int(realize.predicate, 1) or not isinstance(block.body, tir.BufferStore):
        return None
    if block.alloc_buffers or block.match_buffers or (block.init is not None and not isinstance(block.init, tir.BufferStore)):
        return None
    loop_vars = [lp.loop_var for lp in loops]
    if any(not isinstance(v, tir.Var) or v not in loop_vars for v in realize.iter_values) or \
            len(set(map(id, realize.iter_values))) != len(loops):
        return None
    extents = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        loop = loops[loop_vars.index(value)]
        if iv.kind not in ("S", "R") or not tir.is_const_int(iv.dom.min, 0):
            return None
        extents[iv.var] = loop.extent
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "S"]
    reduce_ = [iv.var for iv in block.iter_vars if iv.kind == "R"]
    return _Stage(block, block.body, block.init, spatial, reduce_, extents)


def _read_chain(stages: list, out_buf, params: set) -> AttentionChain:
    """The `AttentionChain` of the stages; raises `_NoMatch` where they differ from it."""
    scores, *pointwise, row_max, exps, row_sum, norm, weighted = stages
    b, h, i, j, d, e = (tir.Var("int64", n) for n in ("b", "h", "i", "j", "d", "e"))
    score = tir.Var(scores.store.buffer.dtype, "score")
    dtype = score.dtype
    _require(dtype in _FLOAT_DTYPES)
    q, k = _score_operands(scores, params)
    canon = dict(zip(scores.spatial, (b, h, i, j)))
    canon[scores.reduce[0]] = d
    q, k = substitute(q, canon), substitute(k, canon)
    _require(j not in vars_in(q.indices) and i not in vars_in(k.indices))
    logit, logits_buf = score, scores.store.buffer
    for stage in pointwise:
        logit, logits_buf = _pointwise(stage, logits_buf, logit, (b, h, i, j), params), stage.store.buffer
    visible = _softmax(row_max, exps, row_sum, norm, logits_buf, (b, h, i, j))
    v, out_indices, head_dim_v = _weighted_sum(weighted, norm.store.buffer, out_buf, params, (b, h, i, j, e))
    head_dim = tir.is_const_int(scores.extents[scores.reduce[0]]) and scores.extents[scores.reduce[0]].value
    _require(head_dim and head_dim_v)
    batch, heads, seq, seq_kv = scores.store.buffer.shape
    return AttentionChain(b, h, i, j, d, e, score, q, k, v, out_buf, out_indices, logit, visible,
                          batch, heads, seq, seq_kv, head_dim, head_dim_v, dtype)


def _is_own_element(store: tir.BufferStore, spatial: list) -> bool:
    return len(store.indices) == len(spatial) and all(x is v for x, v in zip(store.indices, spatial))


def _loads_at(e, buf: tir.Buffer, indices: list) -> bool:
    """Whether ``e`` reads ``buf`` and only at ``indices`` (the same iterators)."""
    loads = [ld for ld in buffer_loads(e, []) if ld.buffer is buf]
    return bool(loads) and all(len(ld.indices) == len(indices) and all(x is y for x, y in zip(ld.indices, indices))
                               for ld in loads)


def _score_operands(stage: _Stage, params: set) -> tuple:
    """``(Q load, K load)`` of the score stage ``S[b, h, i, j] += Q * K`` (init 0)."""
    store = stage.store
    _require(len(stage.spatial) == 4 and len(stage.reduce) == 1 and _is_own_element(store, stage.spatial))
    _require(stage.init is not None and _is_zero(stage.init.value) and stage.init.buffer is store.buffer)
    q, k = _product_of_acc(store, params)
    i, j = stage.spatial[2], stage.spatial[3]
    if i in vars_in(k.indices) or j in vars_in(q.indices):
        q, k = k, q
    return q, k


def _product_of_acc(store: tir.BufferStore, params: set) -> tuple:
    """``(x, y)`` of ``C[...] = C[...] + x * y`` where ``x``, ``y`` are loads of parameters."""
    value = store.value
    _require(isinstance(value, tir.Add) and isinstance(value.b, tir.Mul))
    acc, prod = value.a, value.b
    _require(isinstance(acc, tir.BufferLoad) and acc.buffer is store.buffer
             and all(x is y for x, y in zip(acc.indices, store.indices)))
    x, y = prod.a, prod.b
    _require(isinstance(x, tir.BufferLoad) and isinstance(y, tir.BufferLoad))
    return x, y


def _pointwise(stage: _Stage, prev: tir.Buffer, logit, canon_vars: tuple, params: set) -> tir.PrimExpr:
    """``logit`` after the elementwise stage ``X[b, h, i, j] = f(prev[b, h, i, j], params)``."""
    store = stage.store
    _require(not stage.reduce and len(stage.spatial) == 4 and _is_own_element(store, stage.spatial))
    _require(store.buffer.dtype == prev.dtype and _loads_at(store.value, prev, stage.spatial))
    _require(all(ld.buffer is prev or ld.buffer in params for ld in buffer_loads(store.value, [])))
    canon = dict(zip(stage.spatial, canon_vars))
    return substitute(replaced_loads(store.value, prev, logit), canon)


def _softmax(row_max: _Stage, exps: _Stage, row_sum: _Stage, norm: _Stage, logits: tir.Buffer, canon_vars: tuple):
    """The mask of softmax's four stages along the last axis of ``logits`` (None: unmasked)."""
    # The row maximum: M[b, h, i] = max(M, select(visible, X[b, h, i, r], c)) (init a constant).
    m = row_max.store
    _require(len(row_max.spatial) == 3 and len(row_max.reduce) == 1 and _is_own_element(m, row_max.spatial))
    _require(row_max.init is not None and isinstance(row_max.init.value, tir.FloatImm))
    _require(isinstance(m.value, tir.Max) and _is_self_load(m.value.a, m))
    row = row_max.spatial + row_max.reduce
    max_mask, term = _masked(m.value.b)
    _require(_is_load_at(term, logits, row))
    # exp: E[b, h, i, j] = select(visible, exp(X - M[b, h, i]), 0).
    x = exps.store
    _require(not exps.reduce and len(exps.spatial) == 4 and _is_own_element(x, exps.spatial))
    exp_mask, term = _masked(x.value)
    _require(exp_mask is None or _is_zero(x.value.false_value))
    _require(isinstance(term, tir.Call) and term.op == "tir.exp" and isinstance(term.args[0], tir.Sub))
    _require(_is_load_at(term.args[0].a, logits, exps.spatial))
    _require(_is_load_at(term.args[0].b, m.buffer, exps.spatial[:3]))
    # The row sum of E, and the division by it.
    s = row_sum.store
    _require(len(row_sum.spatial) == 3 and len(row_sum.reduce) == 1 and _is_own_element(s, row_sum.spatial))
    _require(row_sum.init is not None and _is_zero(row_sum.init.value))
    _require(isinstance(s.value, tir.Add) and _is_self_load(s.value.a, s)
             and _is_load_at(s.value.b, x.buffer, row_sum.spatial + row_sum.reduce))
    p = norm.store
    _require(not norm.reduce and len(norm.spatial) == 4 and _is_own_element(p, norm.spatial))
    _require(isinstance(p.value, tir.Div) and _is_load_at(p.value.a, x.buffer, norm.spatial)
             and _is_load_at(p.value.b, s.buffer, norm.spatial[:3]))
    # Both masks the same condition (in the canonical iterators), or neither.
    _require((max_mask is None) == (exp_mask is None))
    if exp_mask is None:
        return None
    at_max = substitute(max_mask, dict(zip(row, canon_vars)))
    at_exp = substitute(exp_mask, dict(zip(exps.spatial, canon_vars)))
    _require(structural_equal(at_max, at_exp, map_free_vars=False) and not contains(at_exp, _is_load))
    return at_exp


def _weighted_sum(stage: _Stage, probs: tir.Buffer, out_buf, params: set, canon_vars: tuple) -> tuple:
    """``(V load, output indices, head_dim_v)`` of ``O[...] += P[b, h, i, r] * V`` (init 0),
    in the canonical iterators."""
    b, h, i, j, e = canon_vars
    store = stage.store
    _require(store.buffer is out_buf and len(stage.reduce) == 1 and len(stage.spatial) == 4)
    _require(sorted(map(id, store.indices)) == sorted(map(id, stage.spatial)))
    _require(stage.init is not None and _is_zero(stage.init.value))
    x, y = _product_of_acc(store, params | {probs})
    p, v = (x, y) if x.buffer is probs else (y, x)
    _require(p.buffer is probs and v.buffer in params and len(p.indices) == 4)
    _require(p.indices[3] is stage.reduce[0] and all(ix in stage.spatial for ix in p.indices[:3]))
    (rest,) = [s for s in stage.spatial if all(s is not ix for ix in p.indices[:3])]
    canon = {p.indices[0]: b, p.indices[1]: h, p.indices[2]: i, stage.reduce[0]: j, rest: e}
    dv = stage.extents[rest]
    return substitute(v, canon), [substitute(ix, canon) for ix in store.indices], \
        tir.is_const_int(dv) and dv.value


def _masked(e) -> tuple:
    """``(condition, value)`` of ``select(condition, value, c)``, or ``(None, e)``."""
    if isinstance(e, tir.Select) and isinstance(e.false_value, tir.FloatImm):
        return e.condition, e.true_value
    return None, e


def _is_zero(e) -> bool:
    return isinstance(e, (tir.FloatImm, tir.IntImm)) and e.value == 0


def _is_load(n) -> bool:
    return isinstance(n, tir.BufferLoad)


def _is_self_load(e, store: tir.BufferStore) -> bool:
    return _is_load_at(e, store.buffer, store.indices)


def _is_load_at(e, buf: tir.Buffer, indices: list) -> bool:
    return (isinstance(e, tir.BufferLoad) and e.buffer is buf and len(e.indices) == len(indices)
            and all(x is y for x, y in zip(e.indices, indices)))
