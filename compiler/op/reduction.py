"""Reductions over axes (axis=None reduces all; negative axes; keepdims)."""

from __future__ import annotations
