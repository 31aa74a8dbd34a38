"""Neural-network layers with PyTorch's names, signatures, parameter names and layouts. Each family's file lists
its layers in __all__ and is star-imported here, so a new layer is public where it is written
(tests/nn/test_public_names.py and tests/core/test_family_exports.py check the names)."""

from typing import TYPE_CHECKING

from . import functional as functional, init as init, utils as utils
from . import activation, attention, containers, conv, dropout, linear, loss, module, normalization, parameter
from . import layers_torch, lazy, pooling, rnn, sparse, transformer, transformer_decoder
from .activation import *  # noqa: F403
from .attention import *  # noqa: F403
from .containers import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .layers_torch import *  # noqa: F403
from .lazy import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import *  # noqa: F403
from .normalization import *  # noqa: F403
from .parameter import *  # noqa: F403
from .pooling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .transformer import *  # noqa: F403
from .transformer_decoder import *  # noqa: F403

_FAMILIES = (activation, attention, containers, conv, dropout, layers_torch, lazy, linear, loss, module, normalization,
             parameter, pooling, rnn, sparse, transformer, transformer_decoder)

# `from rumus.nn import *`: the submodules users reach for and each family's layers. A run-time list: mypy reads
# the star and `as` imports instead (it takes only a literal __all__, hiding every name it misses).
if not TYPE_CHECKING:
    __all__ = ["functional", "init", "utils", *(name for family in _FAMILIES for name in family.__all__)]

from . import modules, parallel  # noqa: E402,F401  (torch.nn.modules.* and torch.nn.parallel paths)
