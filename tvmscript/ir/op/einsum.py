"""NumPy's einsum notation (``"ij,jk->ik"``, ellipses, implicit outputs, repeated subscripts):
`parse_einsum` reads the subscripts into one label per dimension, `einsum_dims` gives each
label its extent. Shared by ``R.einsum``'s inference (`tvmscript.ir.op.linalg`) and its TE
definition (``compiler/topi/linalg.py``), so both read a subscripts string the same way.
"""

from __future__ import annotations

from .. import tir
from ..tir_arith import is_one

__all__ = ["EinsumError", "parse_einsum", "einsum_dims"]


class EinsumError(ValueError):
    """A subscripts string that does not fit the operands (the op's inference reports it)."""


def _labels(term: str, rank: int, where: str) -> list:
    """One label per dimension of an operand of ``rank``: its letter, or for the dimensions an
    ellipsis covers an int counting from the innermost of them (0) outwards, so that the
    operands' ellipsis dimensions line up from the right as NumPy broadcasting does."""
    if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
        raise EinsumError(f"{where}: at most one ellipsis '...' per operand, and no other '.'")
    pre, _, post = term.partition("...")
    for c in pre + post:
        if not c.isalpha() or not c.isascii():
            raise EinsumError(f"{where}: {c!r} is not a subscript letter")
    if "..." not in term:
        if len(term) != rank:
            raise EinsumError(f"{where}: {len(term)} subscripts for an operand of rank {rank}")
        return list(term)
    k = rank - len(pre) - len(post)
    if k < 0:
        raise EinsumError(f"{where}: {len(pre + post)} subscripts for an operand of rank {rank}")
    return list(pre) + list(range(k - 1, -1, -1)) + list(post)


def parse_einsum(subscripts: str, ranks: list) -> tuple:
    """``(labels of each operand, labels of the output)`` of ``subscripts`` for operands of
    ``ranks`` (see `_labels`). Without ``->`` the output is NumPy's implicit one: the
    ellipsis dimensions, then the letters used once, in alphabetical order. Raises
    `EinsumError`."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise EinsumError(f"subscripts {subscripts!r} name {len(terms)} operand(s), but {len(ranks)} are given")
    inputs = [_labels(t, r, f"operand {i} ({t!r})") for i, (t, r) in enumerate(zip(terms, ranks))]
    n_ell = max((sum(isinstance(x, int) for x in labels) for labels in inputs), default=0)
    ellipsis = list(range(n_ell - 1, -1, -1))
    letters = [x for labels in inputs for x in labels if isinstance(x, str)]
    if not arrow:
        return inputs, ellipsis + sorted(c for c in set(letters) if letters.count(c) == 1)
    if rhs.count("...") > 1 or rhs.replace("...", "").count(".") > 0:
        raise EinsumError("the output may hold one ellipsis '...' and no other '.'")
    pre, dots, post = rhs.partition("...")
    for c in pre + post:
        if not c.isalpha() or not c.isascii():
            raise EinsumError(f"output: {c!r} is not a subscript letter")
        if c not in letters:
            raise EinsumError(f"output subscript {c!r} appears in no operand")
        if (pre + post).count(c) > 1:
            raise EinsumError(f"output subscript {c!r} appears more than once")
    return inputs, list(pre) + (ellipsis if dots else []) + list(post)


def einsum_dims(inputs: list, shapes: list) -> dict:
    """The extent of each label: a label's extents must agree (checked where constant), except
    that an extent of 1 broadcasts against n, for letters as for ellipsis dimensions (TVM's and
    NumPy's rule: ``einsum("ij,ij->i")`` of shapes (1, 4) and (2, 4) is (2,))."""
    dims: dict = {}
    for i, (labels, shape) in enumerate(zip(inputs, shapes)):
        for label, d in zip(labels, shape):
            prev = dims.get(label)
            if prev is None or is_one(prev):
                dims[label] = d
            elif is_one(d):
                continue
            elif isinstance(prev, tir.IntImm) and isinstance(d, tir.IntImm) and prev.value != d.value:
                what = f"subscript {label!r}" if isinstance(label, str) else "the ellipsis dimensions"
                raise EinsumError(f"{what} has extent {prev.value} and {d.value} in different operands (operand {i})")
    return dims
