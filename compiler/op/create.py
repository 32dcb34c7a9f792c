"""Tensor creation ops: zeros, ones, full (and their _like forms), arange."""

from __future__ import annotations
