"""L-BFGS, PyTorch's algorithm (two-loop recursion, optional strong-Wolfe line search) over all parameters
flattened into one vector. Needs a closure: it re-evaluates the loss several times per step."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rumus_contracts import RumusError

from .. import _creation
from .._math import cat
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor
from ._update import assign
from .line_search import strong_wolfe
from .optimizer import Optimizer


def _amax_abs(x: Tensor) -> float:
    return float(x.abs().max().item())


class LBFGS(Optimizer):
    """Limited-memory BFGS; `step(closure)` re-evaluates the loss (lr, max_iter, history_size, line_search_fn)."""
    def __init__(self, params: Iterable[Any], lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if lr < 0:
            raise ValueError(f"LBFGS: invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, {"lr": lr, "max_iter": max_iter,
                                  "max_eval": max_eval if max_eval is not None else max_iter * 5 // 4,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        return cat([p.grad.reshape(-1) if p.grad is not None else _creation.zeros(p.numel(), dtype=p.dtype,
                                                                                    device=p.device)
                    for p in self._params], 0)

    def _add_grad(self, t: float, d: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            assign(p, p + d[offset:offset + n].reshape(p.shape) * t)
            offset += n

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Tensor], t: float,
                              d: Tensor) -> tuple[float, Tensor]:
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        flat_grad = self._flat_grad()
        for p, saved in zip(self._params, x):
            assign(p, saved)
        return loss, flat_grad

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        if closure is None:
            raise RumusError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        with no_grad():
            return self._step(closure)

    def _step(self, closure: Callable[[], Any]) -> Any:  # noqa: C901  (one loop, as in PyTorch)
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state.setdefault(id(self._params[0]), {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if _amax_abs(flat_grad) <= tol_grad:
            return orig_loss

        # Any: these come back from the previous step's state (absent on the first iteration, set right below)
        d: Any = state.get("d")
        t: Any = state.get("t")
        old_dirs: Any = state.get("old_dirs")
        old_stps: Any = state.get("old_stps")
        ro: Any = state.get("ro")
        h_diag: Any = state.get("H_diag")
        prev_flat_grad: Any = state.get("prev_flat_grad")
        prev_loss: Any = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y.dot(s).item())
                if ys > 1e-10:  # curvature condition: only then update the history
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y.dot(y).item())
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q).item()) * ro[i]
                    q = q - old_dirs[i] * al[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i].dot(r).item()) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum().item())) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d).item())
            if gtd > -tol_change:  # not a descent direction
                break
            ls_evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x_init = [p.clone() for p in self._params]

                def obj(x: list[Tensor], step: float, direction: Tensor) -> tuple[float, Tensor]:
                    return self._directional_evaluate(closure, x, step, direction)

                loss, flat_grad, t, ls_evals = strong_wolfe(obj, x_init, t, d, loss, flat_grad, gtd,
                                                            max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = _amax_abs(flat_grad) <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = _amax_abs(flat_grad) <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if _amax_abs(d) * abs(t) <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
