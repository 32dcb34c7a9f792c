"""PyTorch importers, under TVM's names (``tvm.relax.frontend.torch``).

- `from_exported_program`: a ``torch.export.ExportedProgram`` (ATen operators, symbolic sizes
  from ``torch.export.Dim``);
- `from_fx`: a ``torch.fx.GraphModule`` from ``torch.fx.symbolic_trace`` with the input
  shapes given (``input_info = [((1, 784), "float32")]``).

Both translate node by node through one table of converters (`base`), raise
`UnsupportedOpsError` listing every operator they cannot translate before converting any, and
keep the weights either as constants or, with ``keep_params_as_input=True``, as parameters
whose arrays ``relax.frontend.detach_params`` takes off the module.
"""

from .exported_program import from_exported_program
from .fx import from_fx

__all__ = ["from_exported_program", "from_fx"]
