"""`rumus quantize CHECKPOINT --model MODULE:FACTORY [--scheme int4 --group-size 128 --method gptq --calib FILE]`.

A safetensors checkpoint holds weights, not the architecture: `--model` names a zero-argument factory
(`package.module:function`) building the float model the checkpoint belongs to. `--calib` is a .npy file
of model inputs (the first axis is the batch; it is fed in batches of --calib-batch rows). The quantized
model is written with rumus.quant.save_quantized (layout documented in rumus/quant/storage.py).

Exit codes: 0 written; 2 bad arguments or unreadable files.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import numpy as np

from rumus_contracts import RumusError

from .. import io, tensor
from ..utils.cli_args import load_factory, positive_int
from ..nn.module import Module
from .quantize import METHODS, quantize
from .storage import save_quantized


def _factory(spec: str) -> Module:
    model = load_factory(spec, "--model")()
    if not isinstance(model, Module):
        raise RumusError(f"--model {spec} returned {type(model).__name__}, not a rumus.nn.Module")
    return model


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rumus quantize", description="Quantize the Linear layers of a checkpoint.")
    p.add_argument("checkpoint", help="float model weights (.safetensors)")
    p.add_argument("--model", required=True, help="package.module:factory building the float model")
    p.add_argument("--scheme", choices=("int4", "q8"), default="int4", help="weight format (default: int4)")
    p.add_argument("--group-size", type=positive_int, default=128,
                   help="int4 group size / q8 block size (default: 128)")
    p.add_argument("--method", choices=METHODS, default="rtn", help="how weights are rounded (default: rtn)")
    p.add_argument("--calib", help=".npy file of model inputs (needed by gptq and awq)")
    p.add_argument("--calib-batch", type=positive_int, default=256, help="calibration rows per batch (default: 256)")
    p.add_argument("--act-order", action="store_true", help="GPTQ: quantize columns by decreasing Hessian diagonal")
    p.add_argument("--out", help="output file (default: CHECKPOINT with .q.safetensors)")
    try:
        args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    try:
        model = _factory(args.model)
        model.load_state_dict(io.load_file(args.checkpoint))
        calib = None
        if args.calib:
            data = np.load(args.calib)
            calib = [tensor(data[i:i + args.calib_batch]) for i in range(0, len(data), args.calib_batch)]
        quantize(model, args.scheme, args.group_size, args.method, calib=calib, act_order=args.act_order)
        out = args.out or os.path.splitext(args.checkpoint)[0] + ".q.safetensors"
        save_quantized(model, out)
    except (RumusError, OSError, ImportError, AttributeError, ValueError) as exc:
        print(f"rumus quantize: {exc}", file=sys.stderr)
        return 2
    n = sum(1 for _ in model.modules() if type(_).__name__ == "QLinear")
    print(f"wrote {out}: {n} layers as {args.scheme}({args.group_size}), method {args.method}")
    return 0
