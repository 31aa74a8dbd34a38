"""torch.nn.modules.rnn's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
])
