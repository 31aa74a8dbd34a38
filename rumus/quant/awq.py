"""AWQ (Lin et al., 2023) for SPEC D int4 groups, host-side in float64 numpy.

Salient input channels are those with large activations: per input channel s = mean|x|^alpha, and
alpha in [0, 1] is found by grid search minimising the layer's output error on the calibration batch,
|| X W^T - (X / s) Q(W s)^T ||^2 with Q the round-to-nearest int4 quantiser of SPEC D. The layer then
holds Q(W s); 1 / s goes into the preceding op when it can be folded there (a LayerNorm's affine), else
it stays as the QLinear's `input_scale`. Then, as published, each (group, output column) gets its
weight range shrunk by the ratio in [0.5, 1] that minimises that group's share of the output error
(clipping outliers buys resolution for the rest); the scale and zero point follow SPEC D's formulas
on the shrunk range.
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
    X = np.asarray(x, np.float64).reshape(-1, wk.shape[0])
    sc, zp = clip_search(wk, X[:: max(1, len(X) // 512)] / s, group_size, grid)
    return layout.int4_codes(wk, sc, zp, group_size), sc, zp, s


def _params_for_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = (hi - lo).astype(np.float32)
    sc = np.where(rng <= layout.INT4_FLAT_RANGE, np.float32(1.0), rng / np.float32(15)).astype(np.float32)
    return sc, (np.clip(np.rint(-lo / sc), 0, 15) + np.float32(0)).astype(np.float32)


def clip_search(wk: np.ndarray, x: np.ndarray, group_size: int, grid: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Per (group, column): shrink [min, max] by the ratio minimising || x_g (w_g - Q(w_g)) ||^2."""
    k, n = wk.shape
    scales, zeros = layout.int4_params(wk, group_size)
    for g in range(layout.int4_num_groups(k, group_size)):
        rows = slice(g * group_size, min(k, (g + 1) * group_size))
        wg, xg = wk[rows].astype(np.float32), x[:, rows]
        lo, hi = wg.min(axis=0), wg.max(axis=0)
        best = np.full(n, np.inf)
        for i in range(grid // 2 + 1):
            r = np.float32(1.0 - i / grid)  # 1.0 down to 0.5
            sc, zp = _params_for_range(lo * r, hi * r)
            q = np.clip(np.rint(wg / sc + zp), 0, 15)
            err = np.mean((xg @ (wg - (q - zp) * sc).astype(np.float64)) ** 2, axis=0)
            better = err < best
            best = np.where(better, err, best)
            scales[g] = np.where(better, sc, scales[g])
            zeros[g] = np.where(better, zp, zeros[g])
    return scales, zeros
