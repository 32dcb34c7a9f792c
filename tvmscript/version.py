"""The version of tvms, a leaf every layer may read (the build cache keys compiled code by it)."""

__version__ = "0.1.0"
