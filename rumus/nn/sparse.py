"""Embedding: a [num_embeddings, embedding_dim] lookup table (PyTorch's names, init and padding_idx)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import ShapeError

from .. import _creation
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import functional as F
from . import init
from ._functional_act import normalize_padding_idx
from .module import Module
from .parameter import Parameter

# rumus.nn star-imports these.
__all__ = ["Embedding"]


class Embedding(Module):
    """weight ~ N(0, 1) with the padding_idx row zeroed; repeated indices accumulate their gradients and the
    padding row receives none."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = normalize_padding_idx(padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(_creation.empty(num_embeddings, embedding_dim, device=device, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if _weight.shape != (num_embeddings, embedding_dim):
                raise ShapeError(f"Embedding: _weight has shape {_weight.shape}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight.detach(), requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0.0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-D, got {embeddings.shape}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
