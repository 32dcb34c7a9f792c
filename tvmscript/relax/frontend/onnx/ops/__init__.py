"""The ONNX converters, one small function per op, grouped by kind. Importing this package
registers them all in `..registry.CONVERTERS`:

- elementwise.py: math functions, arithmetic, comparisons, logic, Cast, Clip, activations;
- nn.py: MatMul, Gemm, Conv, pooling, Pad, normalizations, Softmax, Dropout;
- reduce.py: Reduce*, ArgMax/ArgMin;
- shape.py: Shape, Constant(OfShape), Range, Reshape, Transpose, (Un)Squeeze, Concat, Split,
  Slice, Gather, Expand, Tile, Trilu, DepthToSpace/SpaceToDepth.

To find an op's translation: ``grep -n '"OpType"' ops/*.py``.
"""

from . import elementwise, nn, reduce, shape  # noqa: F401
