"""The layers issue 12 adds for PyTorch programs (recurrent family, Dropout2d, Transformer decoder), gathered
so rumus/nn/__init__.py imports them in one line."""

from .dropout import Dropout1d, Dropout2d, Dropout3d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = ["GRU", "LSTM", "RNN", "Dropout1d", "Dropout2d", "Dropout3d", "GRUCell", "LSTMCell", "RNNBase",
           "RNNCell", "RNNCellBase", "Transformer", "TransformerDecoder", "TransformerDecoderLayer"]
