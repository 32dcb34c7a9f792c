"""TE definitions of the tensor operators, TVM's TOPI: what each Relax op legalizes into.

Each function takes `te.Tensor`s (and plain attribute values) and returns the output tensor(s)
as `te.compute` stages, named as TVM's TOPI names them (``T_add``, ``T_transpose``, ``compute``;
loops ``ax0, ax1`` for C++-style operators, ``i0, i1`` for Python-style ones), so that
legalized modules print the way TVM prints them. The legalizations in ``compiler/op`` call
these through ``bb.call_te``; users can call them too, with ``te.create_prim_func``.

One module per family: `broadcast` (binary operators with NumPy broadcasting), `elemwise`
(unary math, activations), `transform` (shape manipulation, gather/scatter, one_hot), `linalg`
(matmul, einsum), `reduction`, `nn`, and `scan` (cumsum/cumprod, which TE cannot express: it
builds their TensorIR directly).
"""

from . import broadcast, create, elemwise, grad, image, linalg, nn, qnn, reduction, scan, search, transform, vision  # noqa: F401
from .broadcast import *  # noqa: F401,F403
from .create import *  # noqa: F401,F403
from .elemwise import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403
