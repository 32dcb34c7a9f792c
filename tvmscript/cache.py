"""The on-disk cache: one private folder for everything tvms keeps between runs.

What goes in it: the parser's tables (`tvmscript.parser.lalr_tables`), CUBINs NVRTC compiled
(`compiler.nvrtc`) and the CPU kernels' machine code (`compiler.build_cpu`), each kind in its own
subfolder of ``$TVMS_CACHE_DIR``, else ``$XDG_CACHE_HOME/tvms``, else ``~/.cache/tvms``.

Why so careful: what is read from here is executed (machine code) or drives the parser, so a
folder another user could write to is never used, and an entry is trusted only if it is whole:

* the folder is made with mode 0700 and used only while it belongs to this user and nobody
  else can write to it (`folder` returns None otherwise: tvms then works without a cache);
* an entry is a magic line naming its kind and format, the SHA-256 of the payload, then the
  payload; a reader gets None for anything else (a damaged, truncated or foreign file);
* entries are written to a fresh temporary file (``O_EXCL``: never through a planted link)
  and renamed into place, so a reader never sees half of one.

A cache that cannot be written is only a slower run: no function here raises ``OSError``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from typing import Optional

__all__ = ["root", "folder", "read", "write"]


def root() -> str:
    """The cache's base folder (it may not exist yet)."""
    explicit = os.environ.get("TVMS_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tvms")


def folder(kind: str) -> Optional[str]:
    """The private subfolder ``kind`` of the cache, made on first use; None when it cannot be
    made or is not private (owned by someone else, or writable by group or others)."""
    path = os.path.join(root(), kind)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return None
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return path


def read(path: str, magic: bytes) -> Optional[bytes]:
    """The payload of the entry at ``path``, or None if there is none, or it is not a whole
    entry written with ``magic``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = magic + b"\n"
    if not data.startswith(head):
        return None
    digest_end = len(head) + 64
    if data[digest_end:digest_end + 1] != b"\n":
        return None
    payload = data[digest_end + 1:]
    if hashlib.sha256(payload).hexdigest().encode() != data[len(head):digest_end]:
        return None
    return payload


def write(path: str, magic: bytes, payload: bytes) -> bool:
    """Store ``payload`` at ``path`` (atomically); whether it was written."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(magic + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
