"""DLight's rules for GPUs (TVM's ``dlight.gpu``), one module per rule."""

from .base import GPUScheduleRule
from .elementwise import ElementWise
from .fallback import Fallback
from .gemv import GEMV
from .general_reduction import GeneralReduction
from .low_batch_gemv import LowBatchGEMV
from .matmul import Matmul
from .matmul_simt import MatmulSIMT
from .matmul_split_k import MatmulSplitK
from .matmul_tensor_core import MatmulTensorCore
from .reduction import Reduction
from .small_reduction import SmallReduction
from .transpose import Transpose
from .warp_row_reduction import WarpRowReduction

__all__ = ["GPUScheduleRule", "ElementWise", "Fallback", "GEMV", "GeneralReduction", "LowBatchGEMV", "Matmul",
           "MatmulSIMT", "MatmulSplitK", "MatmulTensorCore", "Reduction", "SmallReduction", "Transpose",
           "WarpRowReduction"]
