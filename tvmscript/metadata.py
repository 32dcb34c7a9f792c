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
"""

from __future__ import annotations

import base64

CONSTANT_KEY = "relax.expr.Constant"
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


def section(constants: list, indent: str = "    ") -> list[str]:
    """The lines of the metadata section for these arrays."""
    lines = ["metadata = {", f'{indent}"{CONSTANT_KEY}": [']
    pad = indent * 3
    for array in constants:
        shape = "(" + ", ".join(str(d) for d in array.shape) + ("," if array.ndim == 1 else "") + ")"
        text = encode(array)
        chunks = [text[i:i + WRAP] for i in range(0, len(text), WRAP)] or [""]
        lines.append(f'{indent * 2}R.const_data({shape}, "{array.dtype}",')
        for i, chunk in enumerate(chunks):
            end = "),"if i == len(chunks) - 1 else ""
            lines.append(f'{pad}"{chunk}"{end}')
    lines.append(f"{indent}],")
    lines.append("}")
    return lines
