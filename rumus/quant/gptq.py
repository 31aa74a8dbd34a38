"""GPTQ (Frantar et al., 2022) for SPEC D int4 groups, host-side in float64 numpy.

H = 2 X^T X / n from the layer's calibration inputs, dampened by `percdamp` x mean(diag H); the upper
Cholesky factor of H^-1 drives column-by-column quantisation whose error is fed back into the columns
not yet quantised, with lazy updates: inside a block of `blocksize` columns errors go column by column,
the rest of the matrix is updated once per block. With `act_order` columns are visited by decreasing
diag(H); group parameters are then fixed up front per SPEC D group ("static groups"), so the packed
layout keeps its contiguous K groups.
"""

from __future__ import annotations

import numpy as np

from rumus_contracts.ops import quant as layout


def _group_params(w_cols: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """SPEC D scale / zero point of one group, from its [N, g] slice of W (rows = outputs)."""
    s, z = layout.int4_params(np.ascontiguousarray(w_cols.T), group_size)
    return s[0], z[0]


def gptq_int4(w: np.ndarray, x: np.ndarray, group_size: int, blocksize: int = 128, percdamp: float = 0.01,
              act_order: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w [N, K] (nn.Linear layout), x [S, K] calibration inputs -> (codes [K, N], scales [G, N], zeros [G, N])."""
    W = np.array(w, dtype=np.float64)
    n_out, k = W.shape
    X = np.asarray(x, np.float64).reshape(-1, k)
    H = 2.0 * X.T @ X / max(len(X), 1)
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    groups = layout.int4_num_groups(k, group_size)
    scales = np.ones((groups, n_out), np.float32)
    zeros = np.zeros((groups, n_out), np.float32)
    perm = np.argsort(-np.diag(H), kind="stable") if act_order else np.arange(k)
    if act_order:  # static groups: parameters from the original weights, per original group
        for g in range(groups):
            scales[g], zeros[g] = _group_params(W[:, g * group_size:(g + 1) * group_size], group_size)
    W, H = W[:, perm], H[perm][:, perm]
    H[np.diag_indices(k)] += percdamp * np.mean(np.diag(H))
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T  # upper triangular
    codes = np.zeros((n_out, k), np.uint8)
    for i1 in range(0, k, blocksize):
        i2 = min(i1 + blocksize, k)
        W1, Err1, Hinv1 = W[:, i1:i2].copy(), np.zeros((n_out, i2 - i1)), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            orig = perm[col]
            g = orig // group_size
            if not act_order and orig % group_size == 0:  # a new group starts: params from current weights
                cur = np.concatenate([W1[:, i:], W[:, i2:]], axis=1)[:, :group_size]
                scales[g], zeros[g] = _group_params(cur, group_size)
            s, z = scales[g], zeros[g]
            wcol = W1[:, i]
            q = np.clip(np.rint(wcol.astype(np.float32) / s + z), 0, 15)
            codes[:, orig] = q.astype(np.uint8)
            deq = ((q - z) * s).astype(np.float64)
            err = (wcol - deq) / Hinv1[i, i]
            W1[:, i:] -= np.outer(err, Hinv1[i, i:])
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    return np.ascontiguousarray(codes.T), scales, zeros
