"""Neural-network operators (TVM's ``topi.nn``)."""

from __future__ import annotations

__all__: list = []
