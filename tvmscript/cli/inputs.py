"""The arrays a user gives `tvms run` (``--params``, ``--inputs``, ``--input``, and ``--bind``'s
``--params``): NumPy files read without trusting them, and matched to parameter names.

A file is refused, with one line saying why, before NumPy allocates anything it claims: a header
promising more data than the file holds, an archive member that expands like a zip bomb, or
pickled Python objects (which tvms never loads).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .reporting import Failure, fail

# An archive member that expands more than this many times, past 64 MB, is not loaded.
_MAX_EXPANSION = 200


@dataclass(frozen=True)
class GivenFiles:
    """Where the values of a function's parameters are read from, later ones winning: the
    ``--params`` archives (none when ``--bind`` made them constants), the ``--inputs``
    archives and the ``--input NAME=FILE.npy`` items."""

    params: tuple = ()
    inputs: tuple = ()
    items: tuple = ()


@dataclass(frozen=True)
class Given:
    """A value read from a file for a parameter, and where it came from."""

    value: object
    source: str


def read_given(files: GivenFiles, names: list, fname: str, aliases: dict | None = None) -> dict:
    """{parameter name: `Given`} from ``files``; ``aliases`` maps other names a parameter
    answers to (a prim_func's buffer names) to the parameter's."""
    aliases = aliases or {}
    given: dict = {}

    def put(key: str, value, source: str, where: str) -> None:
        key = aliases.get(key, key)
        if key not in names:
            raise unknown_name(key, names, fname, where)
        given[key] = Given(value, source)

    for path in (*files.params, *files.inputs):
        for key, value in load_arrays(path, "npz").items():
            put(key, value, path, f"{path} has an array '{key}'")
    for item in files.items:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise fail(f"--input expects NAME=FILE.npy (e.g. --input x=image.npy), got {item!r}")
        put(name, load_arrays(path, "npy")[None], path, f"--input {item}")
    return given


def unknown_name(name: str, names: list, fname: str, where: str) -> Failure:
    """The failure for an array named for no parameter of ``fname`` (``where``: whose array)."""
    from ..diagnostics import did_you_mean

    hint = did_you_mean(name, names)
    listed = ", ".join(names) or "none"
    sep = ", but" if where.endswith("'") else ":"
    return fail(f"{where}{sep} {fname}() has no parameter named '{name}' (its parameters: {listed})"
                + (f"; {hint[0]}" if hint else ""))


def given_value(sinfo, value):
    """A loaded array as the VM expects it for ``sinfo``: arrays for tensors, Python scalars for
    prim values, tuples of ints for shapes."""
    import numpy as np

    from .. import relax

    if isinstance(sinfo, relax.PrimStructInfo) and isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(sinfo, relax.ShapeStructInfo) and isinstance(value, np.ndarray) and value.ndim == 1 \
            and value.dtype.kind in "iu":
        return tuple(int(v) for v in value)
    return value


def load_arrays(path: str, want: str) -> dict:
    """{name: array} of a .npz file (``want="npz"``) or {None: array} of a .npy file."""
    import zipfile

    import numpy as np

    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise fail(f"no such file: {path}") from None
    except IsADirectoryError:
        raise fail(f"{path} is a directory") from None
    except PermissionError:
        raise fail(f"permission denied: {path}") from None
    except OSError as err:
        raise fail(f"cannot read {path}: {err.strerror or err}") from None
    is_npz = magic.startswith(b"PK\x03\x04") or magic.startswith(b"PK\x05\x06")
    is_npy = magic == b"\x93NUMPY"
    if want == "npz" and not is_npz:
        hint = " (it is a .npy file: give it with --input NAME=FILE)" if is_npy else ""
        raise fail(f"{path} is not a NumPy .npz archive{hint}")
    if want == "npy" and not is_npy:
        hint = " (it is a .npz archive: give it with --inputs or --params)" if is_npz else ""
        raise fail(f"{path} is not a NumPy .npy file{hint}")
    try:
        _check_headers(path, is_npz)
        loaded = np.load(path, allow_pickle=False)
        if want == "npy":
            return {None: _bfloat16_restored(loaded)}
        with loaded as archive:
            return {key: _bfloat16_restored(archive[key]) for key in archive.files}
    except ValueError as err:
        raise fail(f"cannot read {path}: {err}") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise fail(f"cannot read {path}: a damaged or truncated NumPy file ({type(err).__name__}: {err})") from None


def _bfloat16_restored(array):
    """A bfloat16 array as it was saved: NumPy has no bfloat16, so ``np.save`` writes
    ml_dtypes' (what ``tvms import`` saves a bfloat16 model's weights as) as plain 2-byte
    voids, which no other dtype tvms knows is saved as."""
    if array.dtype.kind != "V" or array.dtype.names is not None or array.dtype.itemsize != 2:
        return array
    from ..runtime.ndarray import _np_dtype

    try:
        return array.view(_np_dtype("bfloat16"))
    except TypeError:  # no ml_dtypes: the VM's dtype check says what is wrong
        return array


def _check_headers(path: str, is_npz: bool) -> None:
    """Refuse, before NumPy allocates anything, an array whose header claims more data than
    the file holds (a header saying 10**12 elements), an archive member that expands
    hundreds of times (a zip bomb): each would take memory the input does not justify; and,
    once every size is checked, an array of Python objects, which only unpickling could load."""
    import math
    import zipfile

    import numpy as np

    def check(f, stored: int, what: str) -> bool:
        """Whether the array ``f`` holds is one of Python objects, once its size is checked."""
        version = np.lib.format.read_magic(f)
        shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                           else np.lib.format.read_array_header_2_0(f))
        claimed = math.prod(shape) * dtype.itemsize
        if claimed > stored:
            raise fail(f"cannot read {path}: {what} claims shape {shape} ({claimed:,} bytes) but holds "
                       f"{stored:,} bytes")
        return dtype.hasobject

    if not is_npz:
        with open(path, "rb") as f:
            holds_objects = check(f, os.path.getsize(path), "the array")
    else:
        holds_objects = False
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.file_size > 64 << 20 and info.file_size > _MAX_EXPANSION * max(info.compress_size, 1):
                    raise fail(f"cannot read {path}: {info.filename} expands "
                               f"{info.file_size // max(info.compress_size, 1):,} times, to {info.file_size:,} "
                               "bytes; not loading it (a zip bomb?)")
                with archive.open(info) as f:
                    holds_objects = check(f, info.file_size, info.filename) or holds_objects
    if holds_objects:
        raise fail(f"cannot read {path}: it holds Python objects (pickled data), which tvms does not load; "
                   "save plain numeric arrays")
