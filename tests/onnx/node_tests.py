"""The ONNX backend test suite's node tests for the operators of the model families people export (CNNs,
transformers, RNNs, detection heads), run against `rumus.onnx.load`.

The `onnx` package generates these cases in Python (`onnx.backend.test.case.node`: one module per operator,
each case a one-node model with inputs and reference outputs); only the selected operators' modules are
imported, so the run takes seconds. A case passes when every output has the reference's dtype and shape and
matches within the case's own rtol/atol (the suite's defaults: 1e-3 / 1e-7).

    python tests/onnx/node_tests.py                 # the per-operator table
    python tests/onnx/node_tests.py --device wgpu   # on another device
    python tests/onnx/node_tests.py --docs docs/ONNX.md   # rewrite the table in the docs
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# operator -> the module of onnx.backend.test.case.node that holds its cases
SUBSET: dict[str, str] = {
    "Abs": "abs", "Add": "add", "And": "and_", "ArgMax": "argmax", "ArgMin": "argmin", "Atan": "atan",
    "AveragePool": "averagepool", "BatchNormalization": "batch_normalization", "Cast": "cast",
    "CastLike": "castlike", "Ceil": "ceil", "Celu": "celu", "Clip": "clip", "Concat": "concat",
    "Constant": "constant", "ConstantOfShape": "constantofshape", "Conv": "conv", "ConvTranspose": "convtranspose",
    "Cos": "cos", "CumSum": "cumsum", "DepthToSpace": "depthtospace", "Div": "div", "Dropout": "dropout",
    "Einsum": "einsum", "Elu": "elu", "Equal": "equal", "Erf": "erf", "Exp": "exp", "Expand": "expand",
    "EyeLike": "eyelike", "Flatten": "flatten", "Floor": "floor", "GRU": "gru", "Gather": "gather",
    "GatherElements": "gatherelements", "GatherND": "gathernd", "Gelu": "gelu", "Gemm": "gemm",
    "GlobalAveragePool": "globalaveragepool", "GlobalMaxPool": "globalmaxpool", "Greater": "greater",
    "GreaterOrEqual": "greater_or_equal", "HardSigmoid": "hardsigmoid", "HardSwish": "hardswish",
    "Identity": "identity", "InstanceNormalization": "instance_normalization", "IsInf": "isinf", "IsNaN": "isnan",
    "LSTM": "lstm", "LayerNormalization": "layernormalization", "LeakyRelu": "leakyrelu", "Less": "less",
    "LessOrEqual": "less_or_equal", "Log": "log", "LogSoftmax": "logsoftmax", "MatMul": "matmul", "Max": "max",
    "MaxPool": "maxpool", "Mean": "mean", "Min": "min", "Mish": "mish", "Mod": "mod", "Mul": "mul", "Neg": "neg",
    "NonZero": "nonzero", "Not": "not_", "OneHot": "onehot", "Or": "or_", "PRelu": "prelu", "Pad": "pad",
    "Pow": "pow", "RNN": "rnn", "Range": "rangeop", "Reciprocal": "reciprocal", "ReduceL1": "reducel1",
    "ReduceL2": "reducel2", "ReduceLogSum": "reduce_log_sum", "ReduceLogSumExp": "reduce_log_sum_exp",
    "ReduceMax": "reducemax", "ReduceMean": "reducemean", "ReduceMin": "reducemin", "ReduceProd": "reduceprod",
    "ReduceSum": "reducesum", "ReduceSumSquare": "reducesumsquare", "Relu": "relu", "Reshape": "reshape",
    "Resize": "resize", "Round": "round", "ScatterElements": "scatterelements", "ScatterND": "scatternd",
    "Selu": "selu", "Shape": "shape", "Sigmoid": "sigmoid", "Sign": "sign", "Sin": "sin", "Size": "size",
    "Slice": "slice", "Softmax": "softmax", "Softplus": "softplus", "Softsign": "softsign",
    "SpaceToDepth": "spacetodepth", "Split": "split", "Sqrt": "sqrt", "Squeeze": "squeeze", "Sub": "sub",
    "Sum": "sum", "Tan": "tan", "Tanh": "tanh", "Tile": "tile", "TopK": "topk", "Transpose": "transpose",
    "Trilu": "trilu", "Unsqueeze": "unsqueeze", "Where": "where", "Xor": "xor",
}


@dataclass
class OpResult:
    op: str
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (case, why)


def collect(ops: Sequence[str]) -> list[tuple[str, Any]]:
    """(operator, case) for the node tests of `ops` (expanded function bodies count for their operator)."""
    warnings.filterwarnings("ignore")
    node = importlib.import_module("onnx.backend.test.case.node")
    start = len(node._NodeTestCases)
    for mod in sorted({SUBSET[o] for o in ops}):
        importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    wanted = set(ops)
    out = []
    for case in node._NodeTestCases[start:]:
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        tested = node._existing_names.get(base)
        op = tested.op_type if tested is not None else case.model.graph.node[0].op_type
        if op in wanted:
            out.append((op, case))
    return out


def run_case(case: Any, device: str) -> str | None:
    """None when the case passes, else why not (one line)."""
    import rumus as rm
    from rumus.onnx.load import OnnxModule
    inputs, expected = case.data_sets[0]
    arrays = [_array(x) for x in inputs]
    if any(a.dtype.kind in "OUS" for a in arrays):
        return "DTypeError: string inputs (rumus has no string tensors)"
    try:
        module = OnnxModule(case.model, case.name, device=device)
        args = [rm.tensor(a, device=device) for a in arrays]
        got = module(*args)
    except Exception as exc:  # the table reports every way a case fails
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    outs = list(got) if isinstance(got, tuple) else [got]
    if len(outs) != len(expected):
        return f"{len(outs)} outputs, expected {len(expected)}"
    for i, (o, e) in enumerate(zip(outs, expected)):
        e = _array(e)
        g = np.asarray(o.numpy())
        if o.dtype.name == "bfloat16" and e.dtype.name == "bfloat16":  # rumus reads bfloat16 back as float32
            e = e.astype(np.float32)
        if g.dtype != e.dtype:
            return f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if g.shape != e.shape:
            return f"output {i}: shape {g.shape}, expected {e.shape}"
        try:
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
        except AssertionError:
            err = np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))) if g.size else 0.0
            return f"output {i}: values differ (max abs error {err:.3g})"
    return None


def _array(x: Any) -> np.ndarray:
    from onnx import TensorProto, numpy_helper
    return np.asarray(numpy_helper.to_array(x) if isinstance(x, TensorProto) else x)


def run(ops: Sequence[str], device: str = "cpu") -> dict[str, OpResult]:
    results = {op: OpResult(op) for op in ops}
    for op, case in collect(ops):
        why = run_case(case, device)
        if why is None:
            results[op].passed.append(case.name)
        else:
            results[op].failed.append((case.name, why))
    return results


def table(results: dict[str, OpResult]) -> str:
    rows = ["| operator | cases | passed | not passing (first reason) |", "|---|---:|---:|---|"]
    for op in sorted(results):
        r = results[op]
        n = len(r.passed) + len(r.failed)
        why = f"{len(r.failed)}: `{r.failed[0][0]}`: {r.failed[0][1]}" if r.failed else ""
        rows.append(f"| {op} | {n} | {len(r.passed)} | {why.replace('|', '/')} |")
    return "\n".join(rows)


def totals(results: dict[str, OpResult]) -> tuple[int, int, int, int]:
    """(passed cases, all cases, operators passing every case, operators)."""
    passed = sum(len(r.passed) for r in results.values())
    total = passed + sum(len(r.failed) for r in results.values())
    full = sum(1 for r in results.values() if not r.failed and r.passed)
    return passed, total, full, len(results)


BEGIN, END = "<!-- node-tests:begin -->", "<!-- node-tests:end -->"


def write_docs(path: str, results: dict[str, OpResult], device: str) -> None:
    import onnx
    passed, total, full, nops = totals(results)
    block = (f"{BEGIN}\nGenerated by `python tests/onnx/node_tests.py --docs {path}` (onnx {onnx.__version__}, "
             f"device {device}): **{passed} of {total} node-test cases pass; {full} of {nops} operators pass "
             f"all their cases.**\n\n{table(results)}\n{END}")
    text = open(path).read()
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text += "\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", nargs="*", default=sorted(SUBSET))
    p.add_argument("--docs", help="rewrite the node-test table in this markdown file")
    p.add_argument("-v", "--verbose", action="store_true", help="list every failing case")
    a = p.parse_args(argv)
    results = run(a.ops, a.device)
    print(table(results))
    passed, total, full, nops = totals(results)
    print(f"\n{passed}/{total} node-test cases pass; {full}/{nops} operators pass all their cases")
    if a.verbose:
        for r in results.values():
            for name, why in r.failed:
                print(f"FAIL {name}: {why}")
    if a.docs:
        write_docs(a.docs, results, a.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
