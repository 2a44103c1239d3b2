"""ladle from Python: partitions over mpi4py communicators, tensors that
wrap numpy arrays without copying, the parallel primitives and their
adjoints, distributed layers, networks, checkpoints, the adjoint and
gradient tests, and operators written in Python (CustomOp).

Importing ladle imports mpi4py (which initialises MPI) and loads the
libladle built by `make python` (or $LADLE_LIBRARY). That libladle must use
mpi4py's MPI; otherwise the import fails with ImportError naming both.
Every nonzero ladle status raises LadleError.
"""

from . import _capi
from . import _core

_core._init_library()
_core._fill_status_names()

from ._core import (ERR, Layout, LadleError, Op, Partition, Tensor, adjoint_test,  # noqa: E402
                    adjoint_tolerance, check, check_mpi_match, gradient_test, mpi_library,
                    set_num_threads, version)
from .primitives import (HaloExchange, all_gather, all_sum_reduce, broadcast,  # noqa: E402
                         halo_exchange, reduce_scatter, repartition, sum_reduce, window)
from .layers import (Activation, BatchNorm, Conv, Ctx, DistBatchNorm, DistConv,  # noqa: E402
                     DistConvGrid, DistFlatten, DistLinear, DistLoss, DistPool, Dropout,
                     Flatten, GlobalAvgPool, Layer, Linear, Loss, LossLayer, Pool, Reshape,
                     Sequential, Softmax)
from .layers_extra import (AdaptivePool, Attention, ConvTranspose, DistAdaptivePool,  # noqa: E402
                           DistConvTranspose, DistGlobalAvgPool, DistGroupNorm,
                           DistInterpolate, DistReplicate, DistReplicateOn,
                           DistTPAttention, DistTPLinear,
                           DistVocabEmbedding, DistVocabLoss, Embedding, GroupNorm,
                           Interpolate, LayerNorm, PosEmbedding, Residual, RMSNorm, add,
                           concat, concat_backward)

SELF = _capi.SELF
lib = _core.lib



from .network import (Network, Optimizer, check_checkpoint_path, load_checkpoint,  # noqa: E402
                      read_checkpoint_meta, save_checkpoint)
from .custom import CustomOp  # noqa: E402
__version__ = version()
