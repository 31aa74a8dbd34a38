"""Which ONNX ops torch's two exporters write for the model families people export, and whether
rumus.onnx.load runs each exported file like onnxruntime does (measured, for docs/ONNX.md).

Small torch models in the style of ResNet, MobileNetV3, ViT, BERT, GPT-2, T5, LSTM/GRU taggers and a
detection head (TopK / NonZero / interpolate) are exported by the TorchScript exporter (dynamo=False) and
by torch.export (dynamo=True, needs onnxscript) at opsets 17-20, with dynamic batch; each file is imported
and run at a batch other than the example's and compared with onnxruntime.

    python tests/onnx/exporter_coverage.py                     # print the tables
    python tests/onnx/exporter_coverage.py --docs docs/ONNX.md # rewrite them in the docs
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as tF

sys.path.insert(0, str(Path(__file__).parent))
from _torch_transformers import Bert, Gpt2  # noqa: E402


class ResNetish(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = tnn.Sequential(tnn.Conv2d(3, 8, 3, 2, 1, bias=False), tnn.BatchNorm2d(8), tnn.ReLU(),
                                   tnn.MaxPool2d(3, 2, 1))
        self.a = tnn.Sequential(tnn.Conv2d(8, 8, 3, 1, 1, bias=False), tnn.BatchNorm2d(8), tnn.ReLU(),
                                tnn.Conv2d(8, 8, 3, 1, 1, bias=False), tnn.BatchNorm2d(8))
        self.down = tnn.Sequential(tnn.Conv2d(8, 16, 1, 2, bias=False), tnn.BatchNorm2d(16))
        self.b = tnn.Sequential(tnn.Conv2d(8, 16, 3, 2, 1, bias=False), tnn.BatchNorm2d(16))
        self.fc = tnn.Linear(16, 10)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        x = tF.relu(x + self.a(x))
        x = tF.relu(self.down(x) + self.b(x))
        return self.fc(torch.flatten(tF.adaptive_avg_pool2d(x, 1), 1))


class MobileNetish(tnn.Module):
    """Depthwise separable blocks, hardswish, squeeze-excite with hardsigmoid."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = tnn.Sequential(tnn.Conv2d(3, 16, 3, 2, 1), tnn.BatchNorm2d(16), tnn.Hardswish())
        self.dw = tnn.Sequential(tnn.Conv2d(16, 16, 3, 1, 1, groups=16), tnn.BatchNorm2d(16), tnn.ReLU6())
        self.se1, self.se2 = tnn.Conv2d(16, 4, 1), tnn.Conv2d(4, 16, 1)
        self.pw = tnn.Sequential(tnn.Conv2d(16, 24, 1), tnn.BatchNorm2d(24), tnn.Hardswish())
        self.head = tnn.Linear(24, 10)

    def forward(self, x: Any) -> Any:
        x = self.dw(self.stem(x))
        s = tF.hardsigmoid(self.se2(tF.relu(self.se1(x.mean((2, 3), keepdim=True)))))
        x = self.pw(x * s)
        return self.head(x.mean((2, 3)))


class ViTish(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch = tnn.Conv2d(3, 32, 4, 4)
        self.cls = tnn.Parameter(torch.randn(1, 1, 32) * 0.02)
        self.pos = tnn.Parameter(torch.randn(1, 17, 32) * 0.02)
        layer = tnn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                            activation="gelu")
        self.enc = tnn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm, self.head = tnn.LayerNorm(32), tnn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.enc(x))[:, 0])


class T5ish(tnn.Module):
    """RMSNorm, bucketed relative position bias (log / min / where on the position grid), gated-GELU FFN."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = tnn.Embedding(37, 32)
        self.rel = tnn.Embedding(8, 4)
        self.qkv, self.o = tnn.Linear(32, 96, bias=False), tnn.Linear(32, 32, bias=False)
        self.wi0, self.wi1, self.wo = tnn.Linear(32, 48, bias=False), tnn.Linear(32, 48, bias=False), \
            tnn.Linear(48, 32, bias=False)
        self.g1, self.g2 = tnn.Parameter(torch.ones(32)), tnn.Parameter(torch.ones(32))

    @staticmethod
    def rms(x: Any, g: Any) -> Any:
        return g * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def bias(self, S: int) -> Any:
        pos = torch.arange(S)
        rel = pos[None, :] - pos[:, None]
        n = rel.abs()
        exact = n < 4
        large = 4 + (torch.log(n.float().clamp(min=1) / 4) / math.log(16 / 4) * 4).long()
        bucket = torch.where(exact, n, torch.clamp(large, max=7))
        return self.rel(bucket).permute(2, 0, 1).unsqueeze(0)

    def forward(self, ids: Any) -> Any:
        B, S = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.rms(x, self.g1)).view(B, S, 3, 4, 8).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) + self.bias(S), -1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, S, 32))
        h = self.rms(x, self.g2)
        return x + self.wo(tF.gelu(self.wi0(h), approximate="tanh") * self.wi1(h))


class LstmTagger(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = tnn.Embedding(37, 16)
        self.rnn = tnn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.out = tnn.Linear(48, 5)

    def forward(self, ids: Any) -> Any:
        return self.out(self.rnn(self.emb(ids))[0])


class GruEncoder(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = tnn.GRU(8, 16, batch_first=True)
        self.out = tnn.Linear(16, 3)

    def forward(self, x: Any) -> Any:
        out, h = self.rnn(x)
        return self.out(out[:, -1] + h[0])


class DetectionHead(tnn.Module):
    """An FPN-style upsample-and-add, per-anchor scores, top-k anchors gathered by index, and the count of
    confident anchors found with nonzero."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = tnn.Conv2d(3, 8, 3, 2, 1), tnn.Conv2d(8, 8, 3, 2, 1)
        self.lat = tnn.Conv2d(8, 8, 1)
        self.cls, self.box = tnn.Conv2d(8, 4, 1), tnn.Conv2d(8, 16, 1)

    def forward(self, x: Any) -> Any:
        f1 = tF.relu(self.c1(x))
        f2 = tF.relu(self.c2(f1))
        p = self.lat(f1) + tF.interpolate(f2, scale_factor=2.0, mode="nearest")
        scores = self.cls(p).flatten(1).sigmoid()  # [B, 4 * H * W]
        boxes = self.box(p).flatten(2).transpose(1, 2).reshape(x.shape[0], -1, 4)
        top, idx = scores.topk(10, dim=1)
        picked = torch.gather(boxes, 1, idx.unsqueeze(-1).expand(-1, -1, 4))
        keep = torch.nonzero(top[0] > 0.5).shape[0]
        return picked * top.unsqueeze(-1), torch.full((1,), keep, dtype=torch.long) + torch.zeros(1, dtype=torch.long)


def IDS(b: int) -> Any:
    return torch.randint(0, 37, (b, 11))


MODELS: dict[str, tuple[Callable[[], tnn.Module], Callable[[int], tuple[Any, ...]]]] = {
    "ResNet-style CNN": (ResNetish, lambda b: (torch.randn(b, 3, 32, 32),)),
    "MobileNetV3-style CNN": (MobileNetish, lambda b: (torch.randn(b, 3, 32, 32),)),
    "ViT-style encoder": (ViTish, lambda b: (torch.randn(b, 3, 16, 16),)),
    "BERT-style encoder": (Bert, lambda b: (IDS(b), torch.ones(b, 11, dtype=torch.long))),
    "GPT-2-style decoder": (Gpt2, lambda b: (IDS(b),)),
    "T5-style block": (T5ish, lambda b: (IDS(b),)),
    "LSTM tagger (2-layer, bidirectional)": (LstmTagger, lambda b: (IDS(b),)),
    "GRU encoder": (GruEncoder, lambda b: (torch.randn(b, 9, 8),)),
    "detection head (Resize/TopK/NonZero)": (DetectionHead, lambda b: (torch.randn(b, 3, 32, 32),)),
}


def _export(model: tnn.Module, args: tuple[Any, ...], path: Path, dynamo: bool, opset: int) -> None:
    names = [f"in{i}" for i in range(len(args))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            batch = torch.export.Dim("batch", min=1, max=64)
            torch.onnx.export(model, args, str(path), input_names=names, dynamo=True, opset_version=opset,
                              dynamic_shapes=tuple({0: batch} for _ in names), verbose=False)
        else:
            torch.onnx.export(model, args, str(path), input_names=names, dynamo=False, opset_version=opset,
                              dynamic_axes={n: {0: "batch"} for n in names})


def measure(models: Sequence[str], opsets: Sequence[int], exporters: Sequence[str]) -> list[dict[str, Any]]:
    import onnx
    import onnxruntime as ort

    import rumus as rm
    from rumus.onnx._interpret import OPS
    from rumus.onnx._interpret_host import HOST_OPS
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="rumus-onnx-cov-"))
    for name in models:
        make, inputs = MODELS[name]
        torch.manual_seed(0)
        model = make().eval()
        for exporter in exporters:
            for opset in opsets:
                row: dict[str, Any] = {"model": name, "exporter": exporter, "opset": opset}
                path = folder / f"m_{len(rows)}.onnx"
                try:
                    _export(model, inputs(3), path, exporter == "dynamo", opset)
                except Exception as exc:  # an export torch itself refuses is a row too
                    row["status"] = f"torch export failed: {type(exc).__name__}"
                    rows.append(row)
                    continue
                graph = onnx.load(str(path)).graph
                row["ops"] = sorted({n.op_type for n in graph.node})
                row["missing"] = [o for o in row["ops"] if o not in OPS and o not in HOST_OPS]
                feeds = {f"in{i}": a.numpy() for i, a in enumerate(inputs(2))}
                try:
                    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
                except Exception as exc:  # torch wrote a file onnxruntime itself rejects: no reference
                    why = f"onnxruntime rejects torch's file ({type(exc).__name__}); "
                    row["status"] = why + _rumus_only(path, feeds)
                    rows.append(row)
                    print(row["model"], row["exporter"], row["opset"], row["status"], flush=True)
                    continue
                try:
                    got = rm.onnx.load(str(path))(*[rm.tensor(v) for v in feeds.values()])
                    got_list = list(got) if isinstance(got, tuple) else [got]
                    err = max(float(np.max(np.abs(g.numpy().astype(np.float64) - w.astype(np.float64))))
                              for g, w in zip(got_list, want))
                    row["status"] = f"max error {err:.1e}" if err <= 1e-4 else f"MISMATCH {err:.1e}"
                except Exception as exc:
                    row["status"] = f"import failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                rows.append(row)
                print(row["model"], row["exporter"], row["opset"], row["status"], flush=True)
    return rows


def _rumus_only(path: Path, feeds: dict[str, np.ndarray]) -> str:
    import rumus as rm
    try:
        rm.onnx.load(str(path))(*[rm.tensor(v) for v in feeds.values()])
    except Exception as exc:
        return f"rumus.onnx.load refuses it too ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})"
    return "rumus.onnx.load runs it"


def tables(rows: list[dict[str, Any]]) -> str:
    out = ["| model | exporter | opset | rumus.onnx.load vs onnxruntime |", "|---|---|---:|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['exporter']} | {r['opset']} | {r['status'].replace('|', '/')} |")
    ops: dict[str, set[str]] = {}
    for r in rows:
        for o in r.get("ops", []):
            ops.setdefault(o, set()).add(r["model"])
    from rumus.onnx._interpret import OPS
    from rumus.onnx._interpret_host import HOST_OPS
    out += ["", "| ONNX op written by torch | implemented | models |", "|---|---|---|"]
    for o in sorted(ops):
        out.append(f"| {o} | {'yes' if o in OPS or o in HOST_OPS else '**no**'} | {', '.join(sorted(ops[o]))} |")
    return "\n".join(out)


BEGIN, END = "<!-- exporter-coverage:begin -->", "<!-- exporter-coverage:end -->"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="*", default=list(MODELS))
    p.add_argument("--opsets", nargs="*", type=int, default=[17, 18, 19, 20])
    p.add_argument("--exporters", nargs="*", default=["legacy", "dynamo"])
    p.add_argument("--docs")
    a = p.parse_args(argv)
    text = tables(measure(a.models, a.opsets, a.exporters))
    print(text)
    if a.docs:
        block = (f"{BEGIN}\nGenerated by `python tests/onnx/exporter_coverage.py --docs {a.docs}` (torch "
                 f"{torch.__version__}).\n\n{text}\n{END}")
        doc = open(a.docs).read()
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):] if BEGIN in doc else doc + "\n" + block
        with open(a.docs, "w") as f:
            f.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
