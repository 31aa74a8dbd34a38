"""torch.nn.modules as a package: `torch.nn.modules.<submodule>.<Name>` resolves to rumus.nn's class."""

from . import (  # noqa: F401
    activation, adaptive, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold,
    instancenorm, linear, loss, module, normalization, padding, pixelshuffle, pooling, rnn, sparse,
    transformer, upsampling, utils,
)
