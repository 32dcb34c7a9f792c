"""Relax operators as the IR declares them: the registry (`registry.py`) and one module per
family, each op one `register_op` call: its arguments and attributes, struct-info inference,
validation and fusion pattern (TVM's ``TOpPattern``, an attribute of the op). ``api.py`` builds
``relax.op.*`` from the table; ``call_tir.py`` checks a ``call_tir`` against the PrimFunc it
calls.

Why here and not in the compiler: the parser, the printer, the BlockBuilder and the checks need
every op's declaration, and none of them compiles. How each op becomes TensorIR is the
compiler's: ``compiler/op/`` attaches the legalizations to these declarations. Importing this
package registers every op.

Helpers the declarations share with the TE definitions (``compiler/topi``) live beside them, so
that inference predicts the shapes the legalized PrimFuncs have: `shape_arith` (folding index
arithmetic), `nn_shapes` (layouts and window extents), `einsum` (the subscripts' notation).
"""

from .registry import Arg, Attr, OpDef, OpError, all_ops, find_op, get_op, register_op  # noqa: F401
# (register the ops)
from . import (ccl, create, elementwise, grad, image, indexing, linalg, manipulate, nn, nn_window, qnn,  # noqa: F401
               reduction, sort, vision, vm_builtin)
