"""The ``T.*`` names and Python operators the TIR builder reads by table: scalar types, the
operators on PrimExprs and the node each builds, loop kinds, block axis kinds and thread tags,
and other spellings TVM accepts. The language server's completion reads them too.

(The ``T.*`` calls in expressions have their own table, `tir_calls.EXPR_CALLS`; the intrinsics
are the IR's, `tir.INTRINSICS`.)
"""

from __future__ import annotations

from ..ir import tir


# The scalar types, ``T.float32`` and the like.
DTYPE_NAMES = set(tir.SCALAR_DTYPES)

# Python operators on PrimExprs and the node each builds.
BINARY_OPS = {
    "+": tir.Add, "-": tir.Sub, "*": tir.Mul, "//": tir.FloorDiv, "%": tir.FloorMod,
}
COMPARE_OPS = {"==": tir.EQ, "!=": tir.NE, "<": tir.LT, "<=": tir.LE, ">": tir.GT, ">=": tir.GE}
BIT_OPS = {"<<": "tir.shift_left", ">>": "tir.shift_right", "&": "tir.bitwise_and",
           "|": "tir.bitwise_or", "^": "tir.bitwise_xor"}

# Loop kinds and block axis kinds by the name that makes them; the tags a thread binds to.
LOOP_KINDS = {
    "range": "serial", "T.serial": "serial", "T.parallel": "parallel",
    "T.vectorized": "vectorized", "T.unroll": "unroll", "T.thread_binding": "thread_binding",
}
AXIS_KINDS = {
    "T.axis.spatial": "S", "T.axis.S": "S", "T.axis.reduce": "R", "T.axis.R": "R",
    "T.axis.scan": "C", "T.axis.opaque": "O",
}
THREAD_TAGS = {
    f"{a}.{b}" for a in ("threadIdx", "blockIdx", "vthread") for b in "xyz"
} | {"vthread"}

# The kinds of block axes, as T.axis.remap spells them: spatial, reduce, scan, opaque.
ITER_KIND_LETTERS = set("SRCO")

# The decorators of a nested function expanded where it is called.
MACRO_DECORATORS = ("T.inline", "T.macro")

# TVM 0.27's shorthands for an allocation in one storage scope.
SCOPED_ALLOCS = {"T.alloc_local": "local", "T.alloc_shared": "shared"}

# Other spellings TVM accepts for a scalar type.
DTYPE_ALIASES = {"T.boolean": "T.bool"}
