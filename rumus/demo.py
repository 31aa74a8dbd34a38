"""`rumus demo`: the XOR MLP of SPEC A1, trained with a progress bar on the default backend.

(A CNN on scikit-learn's digits replaces it when the nn-stack issue lands.)
"""

from __future__ import annotations

import argparse

from tqdm import tqdm

import rumus as rm
from rumus import nn


class XorMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(2, 8)
        self.output = nn.Linear(8, 1)

    def forward(self, x: rm.Tensor) -> rm.Tensor:
        out: rm.Tensor = self.output(rm.relu(self.hidden(x)))
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rumus demo")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rm.manual_seed(args.seed)
    device = rm.default_device()
    model = XorMLP().to(device)
    x = rm.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=device)
    y = rm.tensor([[0.0], [1.0], [1.0], [0.0]], device=device)
    opt = rm.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    bar = tqdm(range(args.steps), desc=f"XOR on {device}", unit="step")
    loss_value = float("nan")
    for step in bar:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == args.steps - 1:
            loss_value = loss.item()
            bar.set_postfix(loss=f"{loss_value:.5f}")
    with rm.no_grad():
        pred = model(x).numpy().ravel()
    print(f"final loss {loss_value:.6f} after {args.steps} Adam steps on {device}")
    print("predictions for [0,0] [0,1] [1,0] [1,1]: " + " ".join(f"{v:.3f}" for v in pred))
    return 0 if loss_value < 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
