"""RNN / LSTM / GRU and their cells against PyTorch: same weights (loaded from torch's state_dict), same
outputs, final states and gradients; packed variable-length batches; dropout between layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm

torch = pytest.importorskip("torch")
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _copy(tmod: Any, rmod: Any) -> None:
    rmod.load_state_dict({k: rm.from_numpy(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})


def _leaf(a: np.ndarray) -> tuple[Any, Any]:
    return torch.tensor(a, requires_grad=True), rm.tensor(a, requires_grad=True)


CONFIGS = [
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2}), ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}), ("LSTM", {"batch_first": True, "bias": False}),
    ("GRU", {}), ("GRU", {"num_layers": 3, "bidirectional": True, "batch_first": True}),
]


@pytest.mark.parametrize(("kind", "kw"), CONFIGS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CONFIGS)])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_layer_matches_torch(kind: str, kw: dict[str, Any], with_state: bool) -> None:
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(3, 5, **kw)
    rmod = getattr(rm.nn, kind)(3, 5, **kw)
    assert [n for n, _ in rmod.named_parameters()] == [n for n, _ in tm.named_parameters()]
    _copy(tm, rmod)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 2, 3) if not kw.get("batch_first") else (2, 4, 3)).astype(np.float32)
    tx, rx = _leaf(x)
    dirs = 2 if kw.get("bidirectional") else 1
    h0 = rng.standard_normal((dirs * kw.get("num_layers", 1), 2, 5)).astype(np.float32)
    targs: tuple[Any, ...] = (tx,)
    rargs: tuple[Any, ...] = (rx,)
    if with_state:
        th, rh = _leaf(h0)
        targs += ((th, th * 0.5),) if kind == "LSTM" else (th,)
        rargs += ((rh, rh * 0.5),) if kind == "LSTM" else (rh,)
    ty, tstate = tm(*targs)
    ry, rstate = rmod(*rargs)
    np.testing.assert_allclose(ry.numpy(), ty.detach().numpy(), **TOL)
    tstates = tstate if kind == "LSTM" else (tstate,)
    rstates = rstate if kind == "LSTM" else (rstate,)
    for a, b in zip(rstates, tstates):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **TOL)
    w = rng.standard_normal(ty.shape).astype(np.float32)
    (ty * torch.from_numpy(w)).sum().backward()
    (ry * rm.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), **TOL)
    tparams = dict(tm.named_parameters())
    for name, p in rmod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), err_msg=name, **TOL)
    if with_state:
        np.testing.assert_allclose(rargs[1][0].grad.numpy() if kind == "LSTM" else rargs[1].grad.numpy(),
                                   targs[1][0].grad.numpy() if kind == "LSTM" else targs[1].grad.numpy(), **TOL)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_cells_match_torch_batched_and_unbatched(kind: str) -> None:
    torch.manual_seed(0)
    tc = getattr(torch.nn, kind + "Cell")(3, 4)
    rc = getattr(rm.nn, kind + "Cell")(3, 4)
    _copy(tc, rc)
    rng = np.random.default_rng(2)
    for shape in [(5, 3), (3,)]:
        x = rng.standard_normal(shape).astype(np.float32)
        tx, rx = _leaf(x)
        h = tc(tx)
        rh = rc(rx)
        h = tc(tx, h)  # a second step feeds the state back
        rh = rc(rx, rh)
        tout, rout = (h[0] + h[1], rh[0] + rh[1]) if kind == "LSTM" else (h, rh)
        np.testing.assert_allclose(rout.numpy(), tout.detach().numpy(), **TOL)
        tout.sum().backward()
        rout.sum().backward()
        np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), **TOL)
        np.testing.assert_allclose(rc.weight_hh.grad.numpy(), tc.weight_hh.grad.numpy(), **TOL)
        tc.zero_grad()
        rc.zero_grad()


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_sequences_match_torch(kind: str, enforce_sorted: bool) -> None:
    from torch.nn.utils.rnn import pack_padded_sequence as tpack
    from torch.nn.utils.rnn import pad_packed_sequence as tpad

    from rumus.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    rmod = getattr(rm.nn, kind)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    _copy(tm, rmod)
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = np.random.default_rng(3).standard_normal((3, 5, 3)).astype(np.float32)
    tx, rx = _leaf(x)
    ty, tstate = tm(tpack(tx, lengths, batch_first=True, enforce_sorted=enforce_sorted))
    ry, rstate = rmod(pack_padded_sequence(rx, lengths, batch_first=True, enforce_sorted=enforce_sorted))
    np.testing.assert_array_equal(ry.batch_sizes.tolist(), ty.batch_sizes.tolist())
    np.testing.assert_allclose(ry.data.numpy(), ty.data.detach().numpy(), **TOL)
    (tp, tl), (rp, rl) = tpad(ty, batch_first=True, total_length=6), pad_packed_sequence(ry, batch_first=True,
                                                                                         total_length=6)
    assert rl.tolist() == tl.tolist() == lengths
    np.testing.assert_allclose(rp.numpy(), tp.detach().numpy(), **TOL)
    th = tstate[0] if kind == "LSTM" else tstate
    rh = rstate[0] if kind == "LSTM" else rstate
    np.testing.assert_allclose(rh.numpy(), th.detach().numpy(), **TOL)
    (tp.sum() + th.sum()).backward()
    (rp.sum() + rh.sum()).backward()
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), **TOL)


def test_pad_sequence_matches_torch() -> None:
    from torch.nn.utils.rnn import pad_sequence as tpad

    from rumus.nn.utils.rnn import pad_sequence
    seqs = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) for n in (3, 1, 2)]
    for bf in (False, True):
        want = tpad([torch.from_numpy(s) for s in seqs], batch_first=bf, padding_value=-1.0).numpy()
        got = pad_sequence([rm.from_numpy(s) for s in seqs], batch_first=bf, padding_value=-1.0).numpy()
        np.testing.assert_array_equal(got, want)


def test_dropout_between_layers_only_in_training() -> None:
    rm.manual_seed(0)
    m = rm.nn.GRU(3, 8, num_layers=2, dropout=0.5)
    x = rm.randn(4, 2, 3)
    m.eval()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    assert not np.allclose(m(x)[0].numpy(), a)  # the second layer saw a dropped-out input
    single = rm.nn.GRU(3, 8, num_layers=1, dropout=0.0)
    single.train()
    np.testing.assert_array_equal(single(x)[0].numpy(), single(x)[0].numpy())


def test_wrong_shapes_raise_shape_error() -> None:
    m = rm.nn.LSTM(3, 4)
    with pytest.raises(rm.ShapeError, match="input_size"):
        m(rm.randn(5, 2, 7))
    with pytest.raises(rm.ShapeError, match="h_0"):
        m(rm.randn(5, 2, 3), (rm.zeros(1, 3, 4), rm.zeros(1, 3, 4)))
