"""The ONNX backend node tests of the model families' operators (tests/onnx/node_tests.py) against
rumus.onnx.load: the pass count may only go up, and a case that does not pass must be refused with a
RumusError naming what is unsupported, never answered wrongly."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

import node_tests  # noqa: E402

# measured with onnx 1.23 (docs/ONNX.md has the table); raise it when more cases pass
PASSING_AT_LEAST = 805

# outputs that differ from the reference only in dtype: ONNX's Range keeps bfloat16, rumus computes the host
# range in float32
KNOWN_DTYPE_ONLY = {"test_range_bfloat16_type_positive_delta"}


@pytest.fixture(scope="module")
def results() -> dict[str, node_tests.OpResult]:
    res = node_tests.run(sorted(node_tests.SUBSET), "cpu")
    print("\n" + node_tests.table(res))
    return res


def test_pass_count_does_not_drop(results: dict[str, node_tests.OpResult]) -> None:
    passed, total, full, ops = node_tests.totals(results)
    print(f"{passed}/{total} cases pass; {full}/{ops} operators pass all their cases")
    assert total > 1000  # the subset was really collected
    assert passed >= PASSING_AT_LEAST


def test_every_failure_is_a_clear_refusal(results: dict[str, node_tests.OpResult]) -> None:
    import rumus_contracts
    refusals = {name for name in dir(rumus_contracts) if name.endswith("Error") or name == "IndexOutOfRange"}
    wrong = [(case, why) for r in results.values() for case, why in r.failed
             if why.split(":")[0] not in refusals and case not in KNOWN_DTYPE_ONLY]
    assert not wrong, "\n".join(f"{c}: {w}" for c, w in wrong[:20])


def test_the_model_family_ops_pass_their_cases(results: dict[str, node_tests.OpResult]) -> None:
    """Ops that torch writes for CNNs, transformers and detection heads pass every node test of theirs, except
    cases in dtypes rumus does not have (int16, unsigned ints beyond uint8)."""
    for op in ("Add", "MatMul", "Gemm", "Softmax", "Gather", "GatherND", "Where", "Expand", "Trilu",
               "CumSum", "Tile", "TopK", "NonZero", "HardSwish", "ReduceL2", "Sign", "Erf", "Gelu",
               "Reshape", "Transpose", "Concat", "Unsqueeze", "Squeeze", "Shape", "Slice", "Split",
               "GlobalAveragePool", "Relu", "Sigmoid", "Tanh", "Sqrt", "Pow", "Mul", "Sub", "Equal"):
        r = results[op]
        other = [(c, w) for c, w in r.failed if not w.startswith("DTypeError")]
        assert r.passed and not other, (op, other[:3])
