"""Large constants in TVMScript text: the metadata section.

TVM prints a constant tensor as ``metadata["relax.expr.Constant"][i]`` and keeps the values out
of the text. tvms keeps them *in* the text, so a module with bound parameters survives
``tvms fmt`` and a round trip through a file: small constants print inline as
``R.const([...], "float32")``, and larger ones are referenced the way TVM does and stored in a
section at the end of the file::

    metadata = {
        "relax.expr.Constant": [
            R.const_data((256, 784), "float32",
                "AAAAAAAA..."
                "..."),
        ],
    }

Each entry is the array's shape, dtype and its raw little-endian bytes in base64, wrapped in
lines of `WRAP` characters (adjacent string literals join, as in Python). The section is read
before the module, so references may come first.

Tensors held in function attributes (the importers' ``R.func_attr({"params": [...]})`` with
``keep_params_as_input=True``) have no literal form at all, so TVM prints them as
``metadata["ffi.Tensor"][i]`` whatever their size; tvms does the same and stores them in a
second table of the same section, with entries of the same form. The parser gives them back as
`tvms.nd` tensors, so such a module survives a round trip through a file.
"""

from __future__ import annotations

import base64

CONSTANT_KEY = "relax.expr.Constant"
# The table of tensors in attributes; older TVM called it "runtime.NDArray".
TENSOR_KEY = "ffi.Tensor"
TENSOR_ALIASES = ("runtime.NDArray", "runtime.Tensor")
# Constants with at most this many elements print inline as R.const(...).
INLINE_LIMIT = 16
WRAP = 96


def is_inline(array) -> bool:
    return array.ndim == 0 or array.size <= INLINE_LIMIT


def encode(array) -> str:
    """The base64 of an array's little-endian bytes."""
    import numpy as np

    data = np.ascontiguousarray(array)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    return base64.b64encode(data.tobytes()).decode("ascii")


def decode(shape: tuple, dtype: str, text: str):
    import numpy as np

    raw = base64.b64decode(text.encode("ascii"), validate=True)
    array = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    count = 1
    for d in shape:
        count *= d
    if array.size != count:
        raise ValueError(f"{array.size} values for shape {tuple(shape)}")
    return array.reshape(shape).astype(np.dtype(dtype)).copy()


class Tables:
    """The arrays a printer refers to by index, collected for the section at the end of the
    file: `constants` (numpy arrays of Relax constants) and `tensors` (`tvms.nd` tensors in
    attributes). One object referred to twice is stored once."""

    def __init__(self) -> None:
        self.constants: list = []
        self.tensors: list = []
        self._index: dict = {}  # id(object) -> its index in its table (the tables keep it alive)

    def __bool__(self) -> bool:
        return bool(self.constants or self.tensors)

    def constant(self, array) -> str:
        return f'metadata["{CONSTANT_KEY}"][{self._add(self.constants, array)}]'

    def tensor(self, tensor) -> str:
        return f'metadata["{TENSOR_KEY}"][{self._add(self.tensors, tensor)}]'

    def section(self, indent: str = "    ") -> list[str]:
        return section(self.constants, indent, [t.numpy() for t in self.tensors])

    def _add(self, table: list, value) -> int:
        index = self._index.get(id(value))
        if index is None:
            index = self._index[id(value)] = len(table)
            table.append(value)
        return index


def section(self, indent: str = "    ") -> list[str]:
        return section(self.constants, indent, [t.numpy() for t in self.tensors])


def _index(table: list, value) -> int:
    """The index of `value` (by identity) in `table`, appending it if it is new."""
    for i, seen in enumerate(table):
        if seen is value:
            return i
    table.append(value)
    return len(table) - 1


def section(constants: list, indent: str = "    ", tensors: list = ()) -> list[str]:
    """The lines of the metadata section for these arrays: the constants' table, then the
    attribute tensors' table (each written only when it has entries)."""
    lines = ["metadata = {"]
    for key, arrays in ((CONSTANT_KEY, constants), (TENSOR_KEY, tensors)):
        if arrays:
            lines += _table(key, arrays, indent)
    lines.append("}")
    return lines


def _table(key: str, arrays: list, indent: str) -> list[str]:
    lines = [f'{indent}"{key}": [']
    pad = indent * 3
    for array in arrays:
        shape = "(" + ", ".join(str(d) for d in array.shape) + ("," if array.ndim == 1 else "") + ")"
        text = encode(array)
        chunks = [text[i:i + WRAP] for i in range(0, len(text), WRAP)] or [""]
        lines.append(f'{indent * 2}R.const_data({shape}, "{array.dtype}",')
        for i, chunk in enumerate(chunks):
            end = ")," if i == len(chunks) - 1 else ""
            lines.append(f'{pad}"{chunk}"{end}')
    lines.append(f"{indent}],")
    return lines
