"""`TensorBase`, the type every runtime tensor has, known without loading NumPy.

The IR holds tensors (weights kept in function attributes, constants) and its structural
equality and printer must recognise them. They import this light module rather than
`runtime.ndarray`, which loads NumPy: `tvms show` and `tvms fmt` need not pay for that.
"""

from __future__ import annotations

__all__ = ["TensorBase"]


class TensorBase:
    """Base of `runtime.ndarray.Tensor` (on any device): ``numpy()`` gives its values."""

    __slots__ = ()

    def numpy(self):
        raise NotImplementedError
