"""Shape manipulation (TVM's ``topi/transform.h``): ``T_transpose``, ..."""

from __future__ import annotations

from .. import te
from ._util import compute

__all__ = ["transpose"]


def transpose(x: te.Tensor, axes=None) -> te.Tensor:
    """``T_transpose``: output dim ``i`` is input dim ``axes[i]`` (reversed when None)."""
    n = len(x.shape)
    axes = list(range(n))[::-1] if axes is None else [a + n if a < 0 else a for a in axes]
    oshape = [x.shape[a] for a in axes]

    def f(idx):
        src = [None] * n
        for i, a in enumerate(axes):
            src[a] = idx[i]
        return x[tuple(src)]

    return compute(oshape, f, name="T_transpose")
