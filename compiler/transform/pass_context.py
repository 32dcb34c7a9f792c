"""``PassContext``: TVM's ``tvm.transform.PassContext``, the settings passes and the build read
while it is entered (``with tvms.transform.PassContext(config={...}):``).

Why: TVM code turns build features on and off with it, the CUDA graphs among them
(``relax.backend.use_cuda_graph``), and ports unchanged. The configuration keys are checked
(TVM refuses unknown ones too): tvms knows `CONFIGS`; ``opt_level`` is kept for TVM's code and
read by no pass.
"""

from __future__ import annotations

import threading

__all__ = ["PassContext", "CONFIGS"]

# key -> (type, default, what it does)
CONFIGS = {
    "relax.backend.use_cuda_graph": (bool, True, "replay the kernels of a static-shape CUDA function as a CUDA "
                                                 "graph (RewriteCUDAGraph; on by default in tvms, off in TVM)"),
}


class _Stack(threading.local):
    def __init__(self) -> None:
        self.contexts: list = []


_stack = _Stack()


class PassContext:
    """The settings in force while entered: ``opt_level`` and ``config`` (key -> value, from
    `CONFIGS`). Contexts nest, each thread has its own, and outside all of them
    `PassContext.current` is the default one (no configuration: every key's default)."""

    def __init__(self, opt_level: int = 2, config: dict | None = None) -> None:
        self.opt_level = int(opt_level)
        self.config = {}
        for key, value in (config or {}).items():
            if key not in CONFIGS:
                raise ValueError(f"PassContext: unknown config key {key!r}; tvms knows: {', '.join(sorted(CONFIGS))}")
            kind = CONFIGS[key][0]
            if kind is bool and value in (0, 1):
                value = bool(value)
            if not isinstance(value, kind):
                raise TypeError(f"PassContext: config {key!r} must be a {kind.__name__}, got {value!r}")
            self.config[key] = value

    @staticmethod
    def current() -> "PassContext":
        """The innermost context entered on this thread, else a default one."""
        return _stack.contexts[-1] if _stack.contexts else PassContext()

    @staticmethod
    def list_configs() -> dict:
        """TVM's ``PassContext.list_configs()``: each key with its type, default and meaning."""
        return {key: {"type": kind.__name__, "default": default, "description": text}
                for key, (kind, default, text) in CONFIGS.items()}

    def get(self, key: str):
        """The value of config ``key`` here: the one given, else its default."""
        return self.config.get(key, CONFIGS[key][1])

    def __enter__(self) -> "PassContext":
        _stack.contexts.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack.contexts.pop()

    def __repr__(self) -> str:
        return f"PassContext(opt_level={self.opt_level}, config={self.config!r})"
