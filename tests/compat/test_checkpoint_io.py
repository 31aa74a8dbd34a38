"""rumus.save / rumus.load: nested checkpoints, file objects, atomic writes, PyTorch files, refusal of code."""

from __future__ import annotations

from typing import Any

import io
import os
import pickle
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import FormatError

torch = pytest.importorskip("torch")


def _net() -> rm.nn.Module:
    rm.manual_seed(0)
    return rm.nn.Sequential(rm.nn.Linear(4, 8), rm.nn.ReLU(), rm.nn.Linear(8, 3))


def test_nested_checkpoint_round_trips_through_a_path(tmp_path: Path) -> None:
    net = _net()
    opt = rm.optim.Adam(net.parameters(), lr=0.01)
    net(rm.randn(5, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    ckpt = {"model": net.state_dict(), "optim": opt.state_dict(), "epoch": 7, "loss": 0.125, "best": float("inf"),
            "name": "mlp", "flags": [True, None], "shape": (2, 3), "big": 2**62 + 1,
            "ints": rm.arange(6).reshape(2, 3), "mask": rm.tensor([True, False]),
            "half": rm.tensor([1.0, 2.0], dtype=rm.float64)}
    path = tmp_path / "ckpt.pt"
    rm.save(ckpt, path)
    back = rm.load(path)
    assert back["epoch"] == 7 and back["loss"] == 0.125 and back["best"] == float("inf") and back["name"] == "mlp"
    assert back["flags"] == [True, None] and back["shape"] == (2, 3) and back["big"] == 2**62 + 1
    assert back["ints"].dtype == rm.int64 and back["ints"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["mask"].tolist() == [True, False] and back["half"].dtype == rm.float64
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(back["model"][k].numpy(), v.numpy())
    # optimizer state keeps its integer keys and tuple hyper-parameters, so it loads back into an optimizer
    assert back["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    opt2 = rm.optim.Adam(_net().parameters(), lr=0.5)
    opt2.load_state_dict(back["optim"])
    assert opt2.param_groups[0]["lr"] == 0.01
    s0 = opt.state_dict()["state"][0]
    np.testing.assert_array_equal(back["optim"]["state"][0]["exp_avg"].numpy(), s0["exp_avg"].numpy())


def test_file_objects_and_non_contiguous_views() -> None:
    x = rm.arange(12).reshape(3, 4).float().T  # a transposed view: saved by value, not by storage
    buf = io.BytesIO()
    rm.save({"x": x, "xs": [x, x]}, buf)
    buf.seek(0)
    back = rm.load(buf)
    np.testing.assert_array_equal(back["x"].numpy(), x.numpy())
    assert back["xs"][0] is back["xs"][1]  # the same tensor saved twice is stored once


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "c.ckpt"
    rm.save({"a": rm.ones(2)}, path)
    with pytest.raises(rm.RumusError, match="cannot be pickled"):
        rm.save({"a": lambda: 0}, path)  # fails while encoding: the old file must survive intact
    assert rm.load(path)["a"].tolist() == [1.0, 1.0]
    assert sorted(os.listdir(tmp_path)) == ["c.ckpt"]


def test_safetensors_files_still_load(tmp_path: Path) -> None:
    rm.io.save_file({"w": rm.ones(2, 2)}, tmp_path / "w.safetensors")
    assert rm.load(tmp_path / "w.safetensors")["w"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("lib", [torch, rm], ids=["torch", "rumus"])
def test_a_saved_module_loads_only_with_weights_only_false(tmp_path: Path, lib: Any) -> None:
    """torch.save(model) / torch.load(f, weights_only=False), the same code in both; the default refuses."""
    import pickle
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.BatchNorm1d(4))
    model.eval()
    path = tmp_path / "model.pt"
    lib.save(model, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        lib.load(path)
    again = lib.load(path, weights_only=False)
    assert type(again) is type(model) and type(again[0].weight) is type(model[0].weight)
    x = lib.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 7)
    np.testing.assert_array_equal(again(x).detach().numpy(), model(x).detach().numpy())
    assert again[0].weight.requires_grad and not again[2].running_mean.requires_grad


@pytest.mark.parametrize("lib", [torch, rm], ids=["torch", "rumus"])
def test_numpy_arrays_and_plain_objects_save_and_load_with_the_opt_in(tmp_path: Path, lib: Any) -> None:
    path = tmp_path / "obj.pt"
    arr = np.arange(6).reshape(2, 3)
    lib.save({"step": 3, "array": arr, "w": lib.ones(2)}, path)
    back = lib.load(path, weights_only=False)
    np.testing.assert_array_equal(back["array"], arr)
    assert back["step"] == 3 and back["w"].tolist() == [1.0, 1.0]


def test_tied_weights_stay_tied_through_a_saved_module(tmp_path: Path) -> None:
    shared = rm.nn.Linear(2, 2)
    model = rm.nn.Sequential(shared, shared)
    rm.save(model, tmp_path / "tied.pt")
    back = rm.load(tmp_path / "tied.pt", weights_only=False)
    assert back[0].weight is back[1].weight


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_state_dict_loads_into_the_matching_rumus_model(tmp_path: Path, legacy: bool) -> None:
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    path = tmp_path / "model.pt"
    torch.save(tnet.state_dict(), path, _use_new_zipfile_serialization=not legacy)
    sd = rm.load(path)
    assert isinstance(sd, OrderedDict) and list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    net = _net()
    net.load_state_dict(sd)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    want = tnet(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(net(rm.from_numpy(x)).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_checkpoint_with_views_dtypes_and_parameters(tmp_path: Path, legacy: bool) -> None:
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    obj = {"view": base[1:, ::2].t(), "base": base, "bf": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
           "long": torch.tensor([3, -4]), "bool": torch.tensor([True, False]),
           "param": torch.nn.Parameter(torch.ones(2)),
           "size": torch.Size([2, 3]), "n": 3, "lr": 0.5, "names": ["a", "b"], "empty": torch.zeros(0, 3)}
    path = tmp_path / "obj.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    back = rm.load(path)
    np.testing.assert_array_equal(back["view"].numpy(), obj["view"].numpy())
    assert back["view"].dtype == rm.float64
    assert back["bf"].dtype == rm.bfloat16 and back["bf"].numpy().tolist() == [1.5, -2.0]
    assert back["long"].dtype == rm.int64 and back["long"].tolist() == [3, -4]
    assert back["bool"].tolist() == [True, False]
    assert isinstance(back["param"], rm.nn.Parameter) and back["param"].requires_grad
    assert back["size"] == (2, 3) and back["n"] == 3 and back["lr"] == 0.5 and back["names"] == ["a", "b"]
    assert back["empty"].shape == (0, 3)


def test_torch_optimizer_state_loads(tmp_path: Path) -> None:
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.1)
    p.sum().backward()
    opt.step()
    opt.zero_grad()
    torch.save({"optimizer": opt.state_dict(), "epoch": 2}, tmp_path / "o.pt")
    back = rm.load(tmp_path / "o.pt")
    st = back["optimizer"]["state"][0]
    np.testing.assert_allclose(st["exp_avg"].numpy(), opt.state[p]["exp_avg"].numpy())
    assert back["optimizer"]["param_groups"][0]["lr"] == 0.1 and back["epoch"] == 2


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


def _evil_pt(path: Path, marker: Path) -> None:
    """A real torch zip whose data.pkl also asks for os.system."""
    torch.save({"w": torch.ones(2)}, path)
    import zipfile
    evil = pickle.dumps({"w": _Evil()}, protocol=2).replace(b"touch pwned", f"touch {marker}".encode())
    src = zipfile.ZipFile(path)
    items = {n: src.read(n) for n in src.namelist()}
    src.close()
    (pkl,) = [n for n in items if n.endswith("/data.pkl")]  # the folder is named after the file
    items[pkl] = evil
    with zipfile.ZipFile(path, "w") as z:
        for n, data in items.items():
            z.writestr(n, data)


def test_malicious_pickle_in_a_pt_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    _evil_pt(tmp_path / "evil.pt", marker)
    with pytest.raises(FormatError, match=r"(posix|os|nt)\.system.*refusing"):
        rm.load(tmp_path / "evil.pt")
    assert not marker.exists()


def test_malicious_legacy_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil_legacy.pt"
    with open(path, "wb") as f:
        pickle.dump(0x1950A86A20F9469CFC6C, f, protocol=2)
        pickle.dump(1001, f, protocol=2)
        pickle.dump({"little_endian": True}, f, protocol=2)
        f.write(pickle.dumps(_Evil(), protocol=2).replace(b"touch pwned", f"touch {marker}".encode()))
    with pytest.raises(FormatError, match="refusing"):
        rm.load(path)
    assert not marker.exists()


def test_garbage_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"hello world, not a checkpoint")
    with pytest.raises(FormatError):
        rm.load(tmp_path / "junk")
    with pytest.raises(FileNotFoundError):
        rm.load(tmp_path / "missing.pt")
