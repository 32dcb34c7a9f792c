"""``tvms.script.from_source``: TVM's name for parsing TVMScript text."""

from __future__ import annotations

from .api import parse


def from_source(source: str, filename: str = "<string>"):
    return parse(source, filename)
