"""RUMUS's side of the small MLP training step that several benchmarks time against torch's
(_torch_small_models.torch_mlp_step): one definition, so their rows measure the same model."""

from __future__ import annotations

from collections.abc import Callable


def rumus_mlp_step() -> Callable[[], None]:
    """784-256-256-10 ReLU MLP, Adam, MSE on a [128, 784] batch; seeds rumus with 0 first."""
    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F
    rm.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = rm.optim.Adam(mlp.parameters(), lr=1e-3)
    mx, my = rm.randn(128, 784), rm.randn(128, 10)

    def step() -> None:
        opt.zero_grad()
        F.mse_loss(mlp(mx), my).backward()
        opt.step()
    return step
