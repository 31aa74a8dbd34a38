"""AWQ (Lin et al., 2023) for SPEC D int4 groups, host-side in float64 numpy.

Salient input channels are those with large activations: per input channel s = mean|x|^alpha, and
alpha in [0, 1] is found by grid search minimising the layer's output error on the calibration batch,
|| X W^T - (X / s) Q(W s)^T ||^2 with Q the round-to-nearest int4 quantiser of SPEC D. The layer then
holds Q(W s); 1 / s goes into the preceding op when it can be folded there (a LayerNorm's affine), else
it stays as the QLinear's `input_scale`. (The published weight-clipping search is not done.)
"""

from __future__ import annotations

import numpy as np

from rumus_contracts.ops import quant as layout


def rtn_dequant(w_kn: np.ndarray, group_size: int) -> np.ndarray:
    s, z = layout.int4_params(w_kn, group_size)
    return layout.int4_dequant(layout.int4_codes(w_kn, s, z, group_size), s, z, group_size).astype(np.float64)


def awq_scales(w: np.ndarray, x: np.ndarray, group_size: int, grid: int = 20) -> tuple[np.ndarray, float]:
    """w [N, K], x [S, K] -> (s [K], best alpha)."""
    W = np.asarray(w, np.float64)
    X = np.asarray(x, np.float64).reshape(-1, W.shape[1])
    ref = X @ W.T
    mag = np.abs(X).mean(axis=0)
    mag = np.where(mag > 0, mag, mag[mag > 0].min() if (mag > 0).any() else 1.0)
    best_err, best_s, best_a = np.inf, np.ones(W.shape[1]), 0.0
    for i in range(grid + 1):
        a = i / grid
        s = mag ** a
        s = s / np.sqrt(s.max() * s.min())  # keep the scales centred around 1
        deq = rtn_dequant((W * s).T, group_size)  # [K, N]
        err = float(np.mean(((X / s) @ deq - ref) ** 2))
        if err < best_err:
            best_err, best_s, best_a = err, s, a
    return best_s, best_a


def awq_int4(w: np.ndarray, x: np.ndarray, group_size: int, grid: int = 20,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """-> (codes [K, N], scales [G, N], zeros [G, N], s [K]) for the weight W * s."""
    s, _ = awq_scales(w, x, group_size, grid)
    wk = np.ascontiguousarray((np.asarray(w, np.float64) * s).T).astype(np.float32)
    sc, zp = layout.int4_params(wk, group_size)
    return layout.int4_codes(wk, sc, zp, group_size), sc, zp, s
