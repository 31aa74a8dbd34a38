"""Malformed/truncated files -> FormatError (fuzzed, derandomized in CI), unsupported ops and modes ->
clear errors, external data, the CLI."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rumus as rm
from rumus import nn
from rumus.cli import main as cli_main
from rumus_contracts import FormatError, RumusError
from rumus_contracts.onnx_lowering import OnnxExportError

pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory: Any) -> bytes:
    path = tmp_path_factory.mktemp("onnx") / "mlp.onnx"
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    rm.onnx.export(model, (rm.randn(3, 4),), str(path))
    return path.read_bytes()


def _load_bytes(tmp_path: Any, data: bytes) -> None:
    p = tmp_path / "f.onnx"
    p.write_bytes(data)
    try:
        m = rm.onnx.load(str(p))
        m(rm.randn(3, 4))
    except RumusError:  # FormatError, or a clear RumusError naming the node for a wrong-but-parsable graph
        pass


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_truncated_file_is_a_format_error(tmp_path_factory: Any, good_bytes: bytes, cut: int) -> None:
    n = cut % len(good_bytes)
    p = tmp_path_factory.mktemp("cut") / "t.onnx"
    p.write_bytes(good_bytes[:n])
    with pytest.raises(FormatError):
        rm.onnx.load(str(p))


@settings(max_examples=150, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted_file_never_crashes(tmp_path_factory: Any, good_bytes: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(good_bytes)
    for pos, val in flips:
        data[pos % len(data)] = val
    _load_bytes(tmp_path_factory.mktemp("flip"), bytes(data))


def test_a_check_failure_without_a_message_is_a_format_error(tmp_path: Any, good_bytes: bytes) -> None:
    # one flipped byte (found by the fuzz test above) makes onnx's checker raise a ValidationError whose
    # message is empty
    data = bytearray(good_bytes)
    data[124] = 128
    p = tmp_path / "f.onnx"
    p.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="the ONNX model is invalid"):
        rm.onnx.load(str(p))


def test_garbage_and_missing_files(tmp_path: Any) -> None:
    (tmp_path / "g.onnx").write_bytes(b"\x00\xffnot an onnx model at all")
    with pytest.raises(FormatError):
        rm.onnx.load(str(tmp_path / "g.onnx"))
    with pytest.raises(FormatError, match="no such"):
        rm.onnx.load(str(tmp_path / "missing.onnx"))


def test_op_without_lowering_is_named(tmp_path: Any) -> None:
    class Bad(nn.Module):
        def forward(self, x: Any) -> Any:
            return rm.ops.get("cumprod")(x, dim=0)  # called as the op itself: no lowering
    with pytest.raises(OnnxExportError, match="cumprod"):
        rm.onnx.export(Bad(), (rm.randn(3, 4),), str(tmp_path / "b.onnx"))
    assert not os.path.exists(tmp_path / "b.onnx")


def test_plugin_style_op_gets_exported_by_declaring_a_lowering(tmp_path: Any) -> None:
    from rumus_contracts.onnx_lowering import OnnxNode
    schema = rm.ops.get("index_add").schema
    old = schema.onnx
    schema.onnx = lambda ctx, ins, outs, a: [OnnxNode("Identity", [ins[0]], list(outs))]
    try:
        class M(nn.Module):
            def forward(self, x: Any) -> Any:
                return rm.ops.get("index_add")(x, rm.tensor(np.array([0])), rm.mul(x[:1], 0.0), dim=0)
        rm.onnx.export(M(), (rm.randn(3, 4),), str(tmp_path / "p.onnx"))
        assert rm.onnx.load(str(tmp_path / "p.onnx"))._nodes[-2].op_type == "Identity"
    finally:
        schema.onnx = old


def test_concat_is_traced_not_frozen(tmp_path: Any) -> None:
    from _helpers import run_ort

    class Cat(nn.Module):
        def forward(self, x: Any) -> Any:
            return rm.cat([x, rm.mul(x, 2.0)], 1)
    rm.onnx.export(Cat(), (rm.randn(3, 4),), str(tmp_path / "c.onnx"), input_names=["x"],
                   dynamic_axes={"x": {0: "b"}})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(run_ort(tmp_path / "c.onnx", {"x": x})[0], np.concatenate([x, 2 * x], 1))


def test_ambiguous_example_sizes_are_refused(tmp_path: Any) -> None:
    with pytest.raises(OnnxExportError, match="pick another example size"):
        rm.onnx.export(nn.Linear(4, 3), (rm.randn(4, 4),), str(tmp_path / "a.onnx"), input_names=["x"],
                       dynamic_axes={"x": [0]})


def _data_file(model_path: Any) -> Any:
    """The one external data file an exported model refers to (its name is unique to each export)."""
    from rumus.onnx._atomic_save import referenced_data_files
    (name,) = referenced_data_files(str(model_path))
    return model_path.parent / name


def test_external_data_round_trip(tmp_path: Any) -> None:
    from _helpers import run_ort
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    x = rm.randn(3, 64)
    rm.onnx.export(model, (x,), str(tmp_path / "big.onnx"), input_names=["x"], external_data=True)
    assert _data_file(tmp_path / "big.onnx").stat().st_size >= 64 * 64 * 4
    assert (tmp_path / "big.onnx").stat().st_size < 64 * 64 * 4
    with rm.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_ort(tmp_path / "big.onnx", {"x": x.numpy()})[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm.onnx.load(str(tmp_path / "big.onnx"))(x).numpy(), want, rtol=1e-6, atol=1e-6)


def test_half_precision_initializers() -> None:
    """float16 / bfloat16 weights are stored as ONNX FLOAT16 / BFLOAT16 (the CPU backend has no half kernels,
    so the encoding is checked directly)."""
    from onnx import TensorProto, numpy_helper

    from rumus.onnx._build import tensor_proto
    from rumus_contracts import bfloat16, float16
    arr = np.array([[1.5, -2.25], [3.0, 0.1]], dtype=np.float32)
    t16 = tensor_proto("w", arr.astype(np.float16), float16)
    assert t16.data_type == TensorProto.FLOAT16
    np.testing.assert_array_equal(numpy_helper.to_array(t16), arr.astype(np.float16))
    tb = tensor_proto("w", arr, bfloat16)
    assert tb.data_type == TensorProto.BFLOAT16
    back = np.asarray(numpy_helper.to_array(tb)).astype(np.float32)
    np.testing.assert_allclose(back, arr, rtol=1e-2)
    assert back[0, 0] == 1.5 and back[0, 1] == -2.25


def test_cli_export_check_run(tmp_path: Any, capsys: Any) -> None:
    out = str(tmp_path / "cli.onnx")
    assert cli_main(["onnx", "export", "test_errors_and_cli:_factory", out, "--input-shape", "3,4",
                     "--dynamic-batch"]) == 0
    assert cli_main(["onnx", "check", out]) == 0
    assert "ok, opset" in capsys.readouterr().out
    np.save(tmp_path / "in.npy", np.ones((6, 4), dtype=np.float32))
    assert cli_main(["onnx", "run", out, "--input", str(tmp_path / "in.npy"), "--save", str(tmp_path / "o")]) == 0
    assert np.load(tmp_path / "o_0.npy").shape == (6, 2)
    (tmp_path / "bad.onnx").write_bytes(b"junk")
    assert cli_main(["onnx", "check", str(tmp_path / "bad.onnx")]) == 2  # a malformed file is bad input


def _factory() -> Any:
    rm.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))


def test_models_over_the_protobuf_limit_go_to_external_data(tmp_path: Any, monkeypatch: Any) -> None:
    """The automatic switch (weights > 2 GB -> path.data), shown with the limit lowered to 16 MB + 1 kB."""
    from rumus.onnx import _build
    monkeypatch.setattr(_build, "PROTOBUF_LIMIT", 2**24 + 1024)
    model = nn.Linear(32, 32)
    rm.onnx.export(model, (rm.randn(3, 32),), str(tmp_path / "auto.onnx"))
    assert _data_file(tmp_path / "auto.onnx").exists()
    x = rm.randn(3, 32)
    np.testing.assert_allclose(rm.onnx.load(str(tmp_path / "auto.onnx"))(x).numpy(), model(x).numpy(), rtol=1e-6)


def test_failed_export_leaves_existing_file_untouched(tmp_path: Any) -> None:
    target = tmp_path / "keep.onnx"
    target.write_bytes(b"previous contents")

    class Bad(nn.Module):
        def forward(self, x: Any) -> Any:
            return rm.ops.get("cumprod")(x, dim=0)  # called as the op itself: no lowering
    with pytest.raises(OnnxExportError):
        rm.onnx.export(Bad(), (rm.randn(3, 4),), str(target))
    assert target.read_bytes() == b"previous contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.onnx"]


def test_training_mode_is_restored_and_export_uses_eval(tmp_path: Any) -> None:
    from _helpers import run_ort
    model = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.BatchNorm1d(6))
    model.train()
    x = rm.randn(5, 4)
    rm.onnx.export(model, (x,), str(tmp_path / "m.onnx"), input_names=["x"])
    assert model.training
    model.eval()
    with rm.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_ort(tmp_path / "m.onnx", {"x": x.numpy()})[0], want, rtol=1e-5, atol=1e-5)


def test_truncated_external_data_is_a_format_error(tmp_path: Any) -> None:
    model = nn.Linear(64, 64)
    rm.onnx.export(model, (rm.randn(3, 64),), str(tmp_path / "e.onnx"), external_data=True)
    data = _data_file(tmp_path / "e.onnx")
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(FormatError):
        rm.onnx.load(str(tmp_path / "e.onnx"))


def test_unsupported_node_is_named_on_import(tmp_path: Any) -> None:
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("Hardmax", ["x"], ["y"], name="my_hardmax")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "h.onnx"))
    with pytest.raises(RumusError, match="my_hardmax.*Hardmax"):
        rm.onnx.load(str(tmp_path / "h.onnx"))


def test_bfloat16_initializers_keep_nan_and_round_to_nearest_even() -> None:
    from rumus.onnx._build import bf16_bits
    vals = np.array([np.nan, -np.nan, np.inf, 1.0, 1.00390625, 3.0e38, 65504.0], np.float32)
    bits = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001], np.uint32).view(np.float32)  # NaN payloads that carry
    for arr in (vals, bits):
        got = bf16_bits(arr)
        back = (got.astype(np.uint32) << 16).view(np.float32)
        assert np.array_equal(np.isnan(back), np.isnan(arr))
    torch = pytest.importorskip("torch")
    finite = np.array([1.0, 1.00390625, 1.01171875, -2.5e-3, 3.0e38, 65504.0], np.float32)
    want = torch.from_numpy(finite).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bf16_bits(finite), want)
