"""The extern functions of samples/extern_call.tvms and samples/mixture.tvms, in NumPy:
``tvms run samples/extern_call.tvms --extern samples/env_funcs.py``.

Seed 004 registers ``env.linear`` and ``env.relu`` with PyTorch; these are the same functions
with NumPy. Each writes its result into its last argument (destination-passing, as
``R.call_tir`` calls it) with ``copyfrom``, which works wherever the tensor lives: with
``--target cuda`` the arguments are GPU tensors, whose ``.numpy()`` is a copy on the host,
so writing into that copy would leave the output unwritten."""

import numpy as np

import tvmscript as tvms


@tvms.register_func("env.linear", override=True)
def linear(x, w, b, out):
    """``out = x @ w.T + b``."""
    out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())


@tvms.register_func("env.relu", override=True)
def relu(x, out):
    """``out = max(x, 0)``."""
    out.copyfrom(np.maximum(x.numpy(), 0))
