"""Writing the files the commands make (formatted sources, imported models, outputs, code,
libraries) so that a crash or a full disk never leaves one half-written."""

from __future__ import annotations

import os
import tempfile


def write_new_atomically(path: str, data: bytes, before_replace=None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, so a
    crash or a full disk never leaves the file half-written. An existing file keeps its
    permissions (a new one gets the default ones); through a symlink, the target is rewritten
    and the link kept. ``before_replace()`` runs just before the rename: the last moment to
    refuse by raising (see `tvmscript.cli.fmt`)."""
    if os.path.isdir(path):
        raise IsADirectoryError(21, "it is a directory", path)
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".tvms-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
