"""The round trip of everything a model may use: each op's schema samples and each exportable nn layer or
functional, exported with rumus.onnx, run in onnxruntime, imported back with rumus.onnx.load and run on cpu
and on wgpu, all compared with rumus eager (tests/onnx/test_roundtrip.py asserts it; this module prints the
coverage table for docs/ONNX.md).

    python tests/onnx/roundtrip.py                      # print the table
    python tests/onnx/roundtrip.py --docs docs/ONNX.md  # rewrite it in the docs
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import rumus as rm
from rumus import nn
from rumus.backend_api import plugins
from rumus_contracts import OpSchema, Sample

sys.path.insert(0, str(Path(__file__).parent))
from roundtrip_modules import MODULE_CASES, Case  # noqa: E402

# Atol/rtol of every comparison with rumus eager on the CPU: onnxruntime and the import on cpu run the same
# float32 math in another order; lavapipe's exp/log/tanh differ from libm by a few ulp more.
TOL = {"onnxruntime": 1e-5, "cpu": 1e-5, "wgpu": 1e-4}


class _Op(nn.Module):
    """One op called with the sample's attributes; all its tensor inputs are graph inputs."""

    def __init__(self, op: str, attrs: dict[str, Any]) -> None:
        super().__init__()
        self.op, self.attrs = op, attrs

    def forward(self, *xs: Any) -> Any:
        op = getattr(rm.ops, self.op)
        return (op.multi if plugins().ops.get(self.op).num_outputs > 1 else op)(*xs, **self.attrs)


# Ops the export refuses, and why (test_roundtrip asserts each: its first sample's export raises OnnxExportError,
# and every op is either here, round-tripped, or training-only).
_GRAPH = ("rumus_graph's sparse message-passing ops (CSR segments) have no ONNX counterpart and declare no lowering")
_PACKED = "packed quantized weights (q8 / int4 blocks) have no ONNX type: dequantize the model before exporting"
_FIXED = "fixed-point tensors (fixed_i16) have no ONNX type"
REFUSED: dict[str, str] = {
    "cumprod": "called as the op itself; rm.cumprod / Tensor.cumprod export through the core's decomposition "
               "(the 'cumsum' row) and ONNX has no cumulative product",
    "cross_entropy_fwd": "the fused kernel behind F.cross_entropy; exported, cross_entropy runs its decomposition "
                         "(the 'cross_entropy (decomposed)' row)",
    "cross_entropy_mean": "the fused kernel behind F.cross_entropy's mean; exported, cross_entropy runs its "
                          "decomposition (the 'cross_entropy (decomposed)' row)",
    "flash_attention": "the fused attention kernel; exported, F.scaled_dot_product_attention runs its decomposition "
                       "(MatMul / Softmax; the 'scaled_dot_product_attention (decomposed)' row)",
    "batch_norm_stats": "the batch statistics of training-mode batch norm: export in eval (running statistics)",
    "hello_swish": "the example plugin's op declares no ONNX lowering; the error tells its author to set OpSchema.onnx",
    **{f"graph_{n}": _GRAPH for n in ("edge_softmax", "sddmm", "segment_argmax", "segment_expand", "segment_max",
                                      "segment_mean", "segment_sum", "spmm", "spmm_t")},
    **{n: _PACKED for n in ("q8_linear", "q8_dequantize", "q8_quantize", "int4_linear", "int4_dequantize",
                            "int4_quantize")},
    **{n: _FIXED for n in ("fixed_linear", "fixed_linear_nobias", "fixed_relu", "fixed_requantize")},
}

# Samples of lowered ops that the exporter refuses on purpose (op -> (what the sample does, why)).
REFUSED_SAMPLES: dict[str, tuple[Callable[[Sample], bool], str]] = {
    "batch_norm": (lambda s: bool(s.attrs.get("training")), "batch statistics in training mode: export in eval"),
    "dropout": (lambda s: float(s.attrs.get("p", 0.0)) > 0.0, "a random mask in training mode: export in eval"),
}


# Samples where onnxruntime's own float32 arithmetic is off while rumus eager and the import match float64:
# the file is right, so only onnxruntime's comparison is left out ((op, sample name) -> why).
ORT_ILL_CONDITIONED: dict[tuple[str, str], str] = {
    ("batch_norm", "constant channels at 1e4/eval"):
        "onnxruntime folds BatchNormalization into x*s + (b - mean*s): at |x| = 1e4 with var 0 that cancels to "
        "6e-2 in float32 (rumus computes (x - mean) * s first and matches float64 to 1e-7)",
    **{("copy", f"edges->{t}"): "float to integer of NaN, +-inf and out-of-range values is undefined in ONNX's "
                                "Cast (rumus defines it; the import on cpu and wgpu matches rumus)"
       for t in ("int32", "int64")},
}


# Layers whose import runs on cpu but not on wgpu, and why (the wgpu backend refuses them with DTypeError).
WGPU_GAPS: dict[str, str] = {}


def training_only(schema: OpSchema) -> bool:
    """Backward, optimizer and loss-scaling ops: they update state in place or compute gradients, which an
    inference graph never holds."""
    if schema.onnx is not None:  # conv2d_backward_input is conv_transpose2d's forward too
        return False
    return schema.inplace or "backward" in schema.name or schema.name.endswith("_bwd")


def _arrays(sample: Sample) -> list[np.ndarray]:
    """The sample's inputs as float32 (float64 arrays) or their own / the declared dtype."""
    out = []
    for k, a in enumerate(sample.inputs):
        arr = np.asarray(a)
        dt = sample.dtypes[k] if sample.dtypes is not None else None
        out.append(arr.astype(dt.numpy) if dt is not None else arr.astype(np.float32) if arr.dtype == np.float64
                   else arr)
    return out


def _exportable(sample: Sample) -> bool:
    return all(d is None or not (d.is_fixed or d.is_packed) for d in (sample.dtypes or ()))


def op_cases() -> list[Case]:
    """A case per sample of every op a forward pass may call (its lowering, or its decomposition when it has
    none), leaving out the refused ops, refused samples and fixed-point / packed inputs (no ONNX type)."""
    from rumus_conformance.cases import samples
    ops = plugins().ops
    cases: list[Case] = []
    for name in sorted(ops.names()):
        schema = ops.get(name)
        if training_only(schema) or name in REFUSED:
            continue
        for i, s in enumerate(samples(schema)):
            refused = REFUSED_SAMPLES.get(name)
            if not _exportable(s) or refused is not None and refused[0](s):
                continue
            arrays, attrs = _arrays(s), dict(s.attrs)
            family = name if schema.onnx is not None else f"{name} (decomposed)"
            cases.append(Case(f"{name}[{i}]", family, lambda n=name, a=attrs: _Op(n, a),  # type: ignore[misc]
                              lambda b, xs=arrays: list(xs), skip_ort=(name, s.name) in ORT_ILL_CONDITIONED))
    return cases


def _to_numpy(res: Any) -> list[np.ndarray]:
    outs = list(res) if isinstance(res, (tuple, list)) else [res]
    return [np.asarray(o.numpy()) for o in outs]


def _compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray], tol: float, where: str) -> float:
    if len(got) != len(want):
        raise AssertionError(f"{where}: {len(got)} outputs instead of {len(want)}")
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise AssertionError(f"{where}: shape {g.shape} instead of {w.shape}")
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            if not np.array_equal(g.astype(w.dtype), w):
                raise AssertionError(f"{where}: integer/bool values differ")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        same_nan = np.isnan(g64) == np.isnan(w64)
        if not same_nan.all():
            raise AssertionError(f"{where}: NaN in different places")
        ok = ~np.isnan(w64)
        if np.any(np.isinf(w64[ok]) != np.isinf(g64[ok])) or np.any(w64[np.isinf(w64)] != g64[np.isinf(w64)]):
            raise AssertionError(f"{where}: infinities differ")
        fin = ok & np.isfinite(w64)
        err = np.abs(g64[fin] - w64[fin]) - tol * np.abs(w64[fin])
        worst = max(worst, float(np.max(np.abs(g64[fin] - w64[fin]), initial=0.0)))
        if np.any(err > tol):
            raise AssertionError(f"{where}: max error {worst:.2e} > {tol:g} (+ rtol {tol:g})")
    return worst


def round_trip(case: Case, devices: Sequence[str], folder: Path) -> dict[str, float]:
    """Export the case's model, then compare onnxruntime and the import on each device with rumus eager at
    every batch size; the worst error per runner."""
    import onnxruntime as ort
    rm.manual_seed(zlib.crc32(case.name.encode()))
    model = case.make().eval()
    example = case.inputs(case.batches[0])
    names = [f"x{i}" for i in range(len(example))]
    path = folder / f"{case.name.replace('/', '_')}.onnx"
    rm.onnx.export(model, tuple(rm.tensor(a) for a in example), str(path), input_names=names,
                   dynamic_axes={names[i]: axes for i, axes in case.dynamic.items()} or None)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    worst: dict[str, float] = {}
    loaded = {d: rm.onnx.load(str(path), device=d) for d in devices}
    for b in case.batches:
        arrays = example if b == case.batches[0] else case.inputs(b)
        with rm.no_grad():
            want = _to_numpy(model(*[rm.tensor(a) for a in arrays]))
        if not case.skip_ort:
            got = [np.asarray(o) for o in session.run(None, dict(zip(names, arrays)))]
            worst["onnxruntime"] = max(worst.get("onnxruntime", 0.0),
                                       _compare(got, want, TOL["onnxruntime"], f"onnxruntime at batch {b}"))
        for d in devices:
            if d.startswith("wgpu") and case.family in WGPU_GAPS:
                continue
            if d.startswith("wgpu") and any(a.dtype == np.float64 for a in [*arrays, *want]):
                continue  # WebGPU has no float64 (WGSL has no f64): the import refuses it with DTypeError
            with rm.no_grad():
                back = _to_numpy(loaded[d](*[rm.tensor(a, device=d) for a in arrays]))
            kind = d.split(":")[0]
            worst[kind] = max(worst.get(kind, 0.0), _compare(back, want, TOL[kind], f"import on {d} at batch {b}"))
    return worst


def all_cases() -> list[Case]:
    return op_cases() + MODULE_CASES


def wgpu_device() -> str | None:
    try:
        rm._runtime.backend("wgpu").devices()
    except rm.BackendUnavailable:
        return None
    return "wgpu:0"


BEGIN, END = "<!-- roundtrip-coverage:begin -->", "<!-- roundtrip-coverage:end -->"


def table() -> str:
    devices = ["cpu"] + ([d] if (d := wgpu_device()) else [])
    folder = Path(tempfile.mkdtemp(prefix="rumus-onnx-rt-"))
    rows: dict[str, dict[str, list[str]]] = {}
    for case in all_cases():
        row = rows.setdefault(case.family, {"cases": [], "onnxruntime": [], "cpu": [], "wgpu": []})
        row["cases"].append(case.name)
        try:
            worst = round_trip(case, devices, folder)
            for k in ("onnxruntime", "cpu", "wgpu"):
                row[k].append(f"{worst[k]:.0e}" if k in worst else "-")
        except Exception as exc:  # a row of the table either way
            print(case.name, type(exc).__name__, str(exc).splitlines()[0][:200], flush=True)
            for k in ("onnxruntime", "cpu", "wgpu"):
                row[k].append("FAIL")
    ops = plugins().ops
    op_rows = {f: r for f, r in rows.items() if f.split(" (")[0] in ops.names() and not f.startswith("nn.")}

    def passed(where: str, among: dict[str, dict[str, list[str]]]) -> int:
        return sum(1 for r in among.values() if "FAIL" not in r[where] and any(v != "-" for v in r[where]))
    training = sorted(n for n in ops.names() if training_only(ops.get(n)))
    out = [f"Ops of the schema registry: **{passed('cpu', op_rows)} of {len(op_rows)} round-trip on cpu, "
           f"{passed('wgpu', op_rows)} on wgpu** (float64 samples are not run on wgpu: WebGPU has no float64), "
           f"{len(REFUSED)} refused with the reason below, {len(training)} training-only. "
           f"Layers and functionals: {passed('cpu', rows) - passed('cpu', op_rows)} of {len(rows) - len(op_rows)} "
           f"round-trip on cpu, {passed('wgpu', rows) - passed('wgpu', op_rows)} on wgpu.", "",
           "| op / layer | cases | onnxruntime vs eager | import on cpu | import on wgpu |", "|---|---:|---|---|---|"]
    for fam, r in rows.items():
        out.append(f"| {fam} | {len(r['cases'])} | {_cell(r['onnxruntime'])} | {_cell(r['cpu'])} | "
                   f"{_cell(r['wgpu'], WGPU_GAPS.get(fam))} |")
    out += ["", "| refused op | why (the export raises OnnxExportError) |", "|---|---|"]
    out += [f"| {n} | {why} |" for n, why in sorted(REFUSED.items())]
    out += [f"| {n} (some samples) | {why} |" for n, (_, why) in sorted(REFUSED_SAMPLES.items())]
    out += ["", f"Training-only ops (gradients, optimizer steps, loss scaling; no inference graph holds them): "
            f"{', '.join(training)}."]
    out += ["", "Comparisons left out on purpose: " + "; ".join(f"{op} sample '{name}' in onnxruntime: {why}"
                                                              for (op, name), why in ORT_ILL_CONDITIONED.items())]
    return "\n".join(out)


def _cell(values: list[str], gap: str | None = None) -> str:
    if gap is not None:
        return f"not run: {gap}"
    if "FAIL" in values:
        return f"**FAIL** ({values.count('FAIL')} of {len(values)})"
    nums = [float(v) for v in values if v != "-"]
    skipped = len(values) - len(nums)
    note = f" ({skipped} not run: float64 or listed below)" if skipped and nums else ""
    return (f"ok, max error {max(nums):.0e}{note}" if nums else "not run (float64)") if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs")
    a = p.parse_args(argv)
    text = table()
    print(text)
    if a.docs:
        block = f"{BEGIN}\nGenerated by `python tests/onnx/roundtrip.py --docs {a.docs}`.\n\n{text}\n{END}"
        doc = Path(a.docs).read_text()
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):] if BEGIN in doc else doc + "\n" + block
        Path(a.docs).write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
