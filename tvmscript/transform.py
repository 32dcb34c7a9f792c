"""``tvms.transform``: TVM's ``tvm.transform``, the pass infrastructure's names.

    with tvms.transform.PassContext(config={"relax.backend.use_cuda_graph": False}):
        ex = tvms.compile(mod, target="cuda")      # no CUDA graphs

``PassContext`` holds the settings passes and the build read while it is entered, ``Sequential``
runs passes in order. Both live in compiler/transform/; this module only re-exports them, so
``import tvmscript`` does not load the compiler.
"""

from tvmscript.compiler.transform import PassContext, Sequential  # noqa: F401

__all__ = ["PassContext", "Sequential"]
