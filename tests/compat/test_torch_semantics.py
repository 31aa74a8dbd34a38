"""torch's semantics, checked by running the same code under torch and under rumus (issue: PyTorch programs
run after renaming the import). Each test takes the library as a parameter and writes the program once."""

from __future__ import annotations

import copy
import pickle
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import rumus

LIBS = [pytest.param(torch, id="torch"), pytest.param(rumus, id="rumus")]


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _model(lib: ModuleType) -> Any:
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
    with lib.no_grad():  # the same weights in both libraries
        for i, p in enumerate(m.parameters()):
            vals = np.linspace(-1, 1, int(np.prod(p.shape)), dtype=np.float32).reshape(p.shape) * (i + 1) / 3
            p.copy_(lib.tensor(vals))
    return m


def _x(lib: ModuleType) -> Any:
    return lib.tensor(np.arange(15, dtype=np.float32).reshape(5, 3) / 10)


@pytest.mark.parametrize("lib", LIBS)
def test_gradients_stay_after_step_until_zero_grad(lib: ModuleType) -> None:
    m = _model(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    m(_x(lib)).sum().backward()
    opt.step()
    grads = [_np(p.grad) for p in m.parameters()]  # logging gradient norms after the step works
    assert all(g is not None for g in grads)
    np.testing.assert_array_equal(_np(next(iter(m.parameters())).grad), grads[0])  # the step left them as they were
    opt.zero_grad(set_to_none=False)
    assert all(np.all(_np(p.grad) == 0) for p in m.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_step_results_and_kept_gradients_match_torch() -> None:
    out = {}
    for lib in (torch, rumus):
        m = _model(lib)
        opt = lib.optim.Adam(m.parameters(), lr=0.05)
        norms = []
        for _ in range(3):  # no zero_grad: gradients accumulate over the steps, in both
            ((m(_x(lib)) ** 2).mean()).backward()
            opt.step()
            norms.append(float(sum((_np(p.grad) ** 2).sum() for p in m.parameters())))
        out[lib.__name__] = ([_np(p) for p in m.parameters()], norms)
    for a, b in zip(out["torch"][0], out["rumus"][0]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["rumus"][1], out["torch"][1], rtol=1e-5)


@pytest.mark.parametrize("lib", LIBS)
def test_frozen_parameters_are_accepted_and_skipped(lib: ModuleType) -> None:
    emb = lib.nn.Embedding.from_pretrained(lib.tensor(np.eye(4, 3, dtype=np.float32)), freeze=True)
    head = lib.nn.Linear(3, 1)
    params = list(emb.parameters()) + list(head.parameters())
    opt = lib.optim.AdamW(params, lr=0.1)
    before = _np(emb.weight).copy()
    head(emb(lib.tensor([0, 2]))).sum().backward()
    opt.step()
    assert emb.weight.grad is None
    np.testing.assert_array_equal(_np(emb.weight), before)


@pytest.mark.parametrize("lib", LIBS)
def test_non_leaf_tensors_are_refused_by_optimizers(lib: ModuleType) -> None:
    w = lib.ones(2, requires_grad=True) * 2
    with pytest.raises(ValueError, match="non-leaf"):
        lib.optim.SGD([w], lr=0.1)


@pytest.mark.parametrize("lib", LIBS)
def test_deepcopy_of_a_module_is_independent_and_equal(lib: ModuleType) -> None:
    m = _model(lib)
    ema = copy.deepcopy(m)
    for a, b in zip(m.parameters(), ema.parameters()):
        assert type(a) is type(b) and b.requires_grad
        np.testing.assert_array_equal(_np(a), _np(b))
    with lib.no_grad():
        next(iter(ema.parameters())).mul_(0)
    assert np.abs(_np(next(iter(m.parameters())))).sum() > 0
    np.testing.assert_array_equal(_np(ema(_x(lib))), _np(ema(_x(lib))))


@pytest.mark.parametrize("lib", LIBS)
def test_deepcopy_keeps_tied_weights_tied(lib: ModuleType) -> None:
    shared = lib.nn.Linear(2, 2)
    outer = lib.nn.Sequential(shared, shared)
    c = copy.deepcopy(outer)
    assert c[0] is c[1] and c[0].weight is c[1].weight


@pytest.mark.parametrize("lib", LIBS)
def test_deepcopy_of_a_leaf_copies_its_grad_and_refuses_a_non_leaf(lib: ModuleType) -> None:
    x = lib.ones(3, requires_grad=True)
    x.grad = lib.full((3,), 2.0)
    c = copy.deepcopy(x)
    np.testing.assert_array_equal(_np(c.grad), [2, 2, 2])
    assert c.requires_grad and c.grad_fn is None
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)


@pytest.mark.parametrize("lib", LIBS)
def test_pickle_round_trips_modules_parameters_and_tensors(lib: ModuleType) -> None:
    m = _model(lib)
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(_np(m2(_x(lib))), _np(m(_x(lib))))
    p = pickle.loads(pickle.dumps(lib.nn.Parameter(lib.ones(2))))
    assert type(p).__name__ == "Parameter" and p.requires_grad
    t = pickle.loads(pickle.dumps(lib.arange(6).reshape(2, 3)[:, 1:]))  # a view: its logical contents
    np.testing.assert_array_equal(_np(t), [[1, 2], [4, 5]])


@pytest.mark.parametrize("lib", LIBS)
def test_module_paths_programs_import(lib: ModuleType) -> None:
    import importlib
    name = lib.__name__
    for path, attr in [("nn.parallel", "DistributedDataParallel"), ("nn.modules.activation", "ReLU"),
                       ("nn.modules.loss", "CrossEntropyLoss"), ("utils.data.dataloader", "DataLoader"),
                       ("utils.data.sampler", "RandomSampler"), ("utils.data.dataset", "TensorDataset"),
                       ("utils.data.distributed", "DistributedSampler"), ("backends.cudnn", "benchmark"),
                       ("cuda.amp", "GradScaler"), ("serialization", "save")]:
        assert hasattr(importlib.import_module(f"{name}.{path}"), attr), f"{name}.{path}.{attr}"
    assert importlib.import_module(f"{name}.nn.modules.activation").ReLU is lib.nn.ReLU
    lib.backends.cuda.matmul.allow_tf32 = True  # accepted
    lib.backends.cudnn.benchmark = True
    assert lib.backends.cudnn.benchmark is True


@pytest.mark.parametrize("lib", LIBS)
def test_data_parallel_wraps_and_prefixes_state_dict(lib: ModuleType) -> None:
    m = lib.nn.DataParallel(lib.nn.Linear(3, 2)) if hasattr(lib.nn, "DataParallel") else \
        lib.nn.parallel.DataParallel(lib.nn.Linear(3, 2))
    assert sorted(m.state_dict()) == ["module.bias", "module.weight"]
    assert tuple(m(_x(lib)).shape) == (5, 2)


@pytest.mark.parametrize("lib", LIBS)
def test_bool_stays_bool_through_triu_and_tril(lib: ModuleType) -> None:
    ones = lib.ones(4, 4, dtype=lib.bool)
    up, low = lib.triu(ones, diagonal=1), lib.tril(ones, -1)
    assert up.dtype == lib.bool and low.dtype == lib.bool
    assert _np(up).tolist() == np.triu(np.ones((4, 4), bool), 1).tolist()
    assert _np(low).tolist() == np.tril(np.ones((4, 4), bool), -1).tolist()


@pytest.mark.parametrize("lib", LIBS)
def test_an_out_of_range_index_raises_index_error(lib: ModuleType) -> None:
    with pytest.raises(IndexError):
        lib.zeros(3)[5]
    with pytest.raises(IndexError):
        lib.zeros(2, 3)[:, -4]


@pytest.mark.parametrize("lib", LIBS)
def test_dropout2d_on_a_2d_input_warns_and_drops_elementwise(lib: ModuleType) -> None:
    lib.manual_seed(0)
    x = lib.ones(64, 32)
    with pytest.warns(UserWarning, match="2-D input to dropout2d"):
        y = lib.nn.Dropout2d(0.5)(x)
    kept = _np(y) != 0
    assert 0.3 < kept.mean() < 0.7
    assert not (kept.all(axis=1) | ~kept.any(axis=1)).all()  # not whole rows: element-wise, as torch's
    np.testing.assert_allclose(_np(y)[kept], 2.0)


@pytest.mark.parametrize("lib", LIBS)
def test_creation_overloads(lib: ModuleType) -> None:
    assert tuple(lib.randint(10, (3,)).shape) == (3,)
    assert tuple(lib.randint(2, 5, (2, 2)).shape) == (2, 2)
    assert tuple(lib.zeros(size=(2, 3)).shape) == (2, 3)
    assert tuple(lib.empty(size=[4]).shape) == (4,)
    assert tuple(lib.randn(size=(1, 2)).shape) == (1, 2)
    assert lib.randint(10, (100,)).max().item() < 10


@pytest.mark.parametrize("lib", LIBS)
def test_assignment_drops_leading_size_one_dims_of_the_value(lib: ModuleType) -> None:
    a = lib.zeros(3, 1)
    a[1] = lib.ones(1, 1) * 5
    b = lib.zeros(4)
    b[2] = lib.tensor([[7.0]])
    assert a.tolist() == [[0.0], [5.0], [0.0]] and b.tolist() == [0.0, 0.0, 7.0, 0.0]
    with pytest.raises(RuntimeError):
        lib.zeros(2)[0] = lib.ones(2, 1)


@pytest.mark.parametrize("lib", LIBS)
def test_small_habits_of_torch_programs(lib: ModuleType) -> None:
    assert tuple(lib.Tensor(2, 3).shape) == (2, 3) and lib.Tensor(2, 3).dtype == lib.float32
    assert tuple(lib.Tensor().shape) == (0,)
    assert lib.Tensor([1, 2]).dtype == lib.float32
    assert lib.Size([2, 3]) == (2, 3) and lib.Size([2, 3]).numel() == 6
    x = lib.zeros(3)
    assert x.type() == "torch.FloatTensor" and x.type(lib.LongTensor).dtype == lib.int64
    assert x.type("torch.IntTensor").dtype == lib.int32 and x.type(lib.float64).dtype == lib.float64
    state = lib.get_rng_state()
    a = lib.randn(4)
    lib.set_rng_state(state)
    np.testing.assert_array_equal(lib.randn(4).numpy(), a.numpy())
    lib.use_deterministic_algorithms(False)
    lib.set_float32_matmul_precision("high")
    assert lib.get_float32_matmul_precision() == "high"
    lib.set_float32_matmul_precision("highest")
    assert lib.autograd.Variable(lib.ones(2), requires_grad=True).requires_grad



@pytest.mark.parametrize("lib", LIBS)
def test_bool_stays_bool_through_where_masked_fill_and_maximum(lib: ModuleType) -> None:
    x = lib.tensor([-1.0, 2.0, 3.0])
    b = lib.tensor([True, False, True])
    for out, want in [(lib.where(x > 0, b, b), [True, False, True]), (lib.where(x > 0, b, False), [False, False, True]),
                      (lib.maximum(b, ~b), [True, True, True]), (lib.minimum(b, ~b), [False, False, False]),
                      (b.masked_fill(~b, True), [True, True, True]), (b.tile(2), [True, False, True] * 2)]:
        assert out.dtype == lib.bool and out.tolist() == want
