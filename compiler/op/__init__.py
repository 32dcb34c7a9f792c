"""The legalizations of the Relax ops, one module per family: how each op the IR declares
(``tvmscript/ir/op``) becomes TensorIR, through TE and ``compiler/topi``. Importing this
package attaches every legalization to its op (`legalize.register_legalize`); LegalizeOps
imports it before it reads them.
"""

from . import (ccl, create, elementwise, grad, image, indexing, linalg, manipulate, nn, qnn,  # noqa: F401
               reduction, sort, vision)
from .legalize import register_legalize  # noqa: F401
