"""Reductions over axes (TVM's ``topi/reduction.h``)."""

from __future__ import annotations

__all__: list = []
