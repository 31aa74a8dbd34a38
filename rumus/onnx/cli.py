"""`rumus onnx export MODULE:FACTORY --input-shape ... OUT`, `rumus onnx check FILE`, `rumus onnx run FILE
--input ...` (the backend comes from RUMUS_BACKEND)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ..utils.cli_args import load_factory


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(s) for s in text.replace("x", ",").split(",") if s.strip())
    except ValueError:
        raise RumusError(f"{text!r} is not a shape: whole numbers separated by commas, e.g. 2,3,32,32") from None
    if not dims or min(dims) < 0:
        raise RumusError(f"{text!r} is not a shape: whole numbers >= 0 separated by commas, e.g. 2,3,32,32")
    return dims


def _export(args: Any) -> int:
    import rumus as rm
    model = load_factory(args.factory, "FACTORY")()
    if not isinstance(model, rm.nn.Module):
        raise RumusError(f"{args.factory} returned {type(model).__name__}, not a rumus.nn.Module")
    dtypes = args.input_dtype or ["float32"] * len(args.input_shape)
    inputs = []
    for shape, dt in zip(args.input_shape, dtypes):
        arr = np.zeros(_shape(shape), dtype=dt) if dt.startswith("int") else \
            np.random.default_rng(0).standard_normal(_shape(shape))
        inputs.append(rm.tensor(arr, dtype=dt))
    names = [f"input_{i}" for i in range(len(inputs))]
    dynamic = {n: {0: "batch"} for n in names} if args.dynamic_batch else None
    rm.onnx.export(model, tuple(inputs), args.out, input_names=names, dynamic_axes=dynamic,
                   opset_version=args.opset)
    print(f"wrote {args.out}")
    return 0


def _check(args: Any) -> int:
    import rumus as rm
    m = rm.onnx.load(args.file)
    n_params = sum(p.numel() for p in m.parameters())
    print(f"{args.file}: ok, opset {m.opset}, {len(m._nodes)} nodes, {n_params} parameters, "
          f"inputs {m.input_names}, outputs {m.output_names}")
    return 0


def _run(args: Any) -> int:
    import rumus as rm
    m = rm.onnx.load(args.file)
    inputs = [rm.tensor(np.load(p)) if p.endswith(".npy") else rm.randn(*_shape(p)) for p in args.input]
    with rm.no_grad():
        out = m(*inputs)
    for i, o in enumerate(out if isinstance(out, tuple) else (out,)):
        arr = o.numpy()
        print(f"output {i}: shape {arr.shape} dtype {arr.dtype} on {o.device}")
        if args.save:
            np.save(f"{args.save}_{i}.npy", arr)
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rumus onnx")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export MODULE:FACTORY (a callable returning an nn.Module)")
    e.add_argument("factory", help="package.module:function that builds the model with no arguments")
    e.add_argument("out", help="the .onnx file to write")
    e.add_argument("--input-shape", action="append", required=True, help="e.g. 2,3,32,32 (repeat per input)")
    e.add_argument("--input-dtype", action="append", help="float32 (default) or int64 (repeat per input)")
    e.add_argument("--dynamic-batch", action="store_true", help="make dim 0 of every input dynamic")
    e.add_argument("--opset", type=int, default=None, help="default: the newest the onnx package defines")
    c = sub.add_parser("check", help="load and validate an ONNX file")
    c.add_argument("file", help="the .onnx file")
    r = sub.add_parser("run", help="run an ONNX file with rumus (backend from RUMUS_BACKEND)")
    r.add_argument("file", help="the .onnx file")
    r.add_argument("--input", action="append", required=True, help="an .npy file or a shape like 2,8 (random)")
    r.add_argument("--save", help="save outputs as PREFIX_<i>.npy")
    args = p.parse_args(argv)
    try:
        return int({"export": _export, "check": _check, "run": _run}[args.cmd](args))
    except RumusError as exc:  # a missing or malformed file, a bad factory or shape: bad input
        print(f"rumus onnx {args.cmd}: error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
