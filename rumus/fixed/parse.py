"""Reading fixtures: strict validation, every problem a FormatError that names the field.

Any valid JSON spelling is accepted (the canonical layout is what we write, not what we demand);
everything else is checked: known keys only, no duplicates, integers only, values in int16,
the named semantics and the shapes fitting together. The text goes through the hardened JSON loader
(rumus.io.json_safe: bounded bytes, nesting and integer digits), and ranks, dims and element counts
are bounded before anything is allocated, so a hostile fixture is a FormatError, never a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from rumus_contracts import FormatError
from rumus_contracts.ops.fixed import OVERFLOW, ROUNDING

from ..io import json_safe
from .fixture import DTYPE_NAME, FORMAT, VERSION, Fixture, LayerRecord, LinearRecord, ReluRecord, chain_problems

TOP_KEYS = ("format", "version", "dtype", "scale_log2", "scale", "rounding", "overflow", "layers", "input_shape",
            "input", "output_shape", "output")
LINEAR_KEYS = ("kind", "in_features", "out_features", "weight_shape", "weight", "bias_shape", "bias")
I16_MIN, I16_MAX = -32768, 32767
MAX_RANK = 32          # as many dims as a .rrec record; real fixtures use 1-3
MAX_WIDTH = 1 << 24    # features of one layer, and any one dim
MAX_VALUES = 1 << 26   # values in one array (input, output, one weight): 128 MiB of int16
FIXTURE_LIMITS = json_safe.JsonLimits(max_bytes=256 << 20, max_depth=8, max_int_digits=12, allow_floats=False)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _object(value: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(f"{where or 'the fixture'}: expected a JSON object, got {type(value).__name__}")
    prefix = f"{where}." if where else ""
    for key in keys:
        if key not in value:
            raise FormatError(f"{prefix}{key}: missing field")
    for key in value:
        if key not in keys:
            raise FormatError(f"{prefix}{key}: unknown field")
    return value


def _int(value: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
    if not _is_int(value):
        raise FormatError(f"{where}: expected an integer, got {json.dumps(value)[:40]}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise FormatError(f"{where}: {value} is outside {lo}..{hi if hi is not None else ''}")
    return int(value)


def _exact(value: Any, where: str, expected: Any) -> None:
    if value != expected or type(value) is not type(expected):
        raise FormatError(f"{where}: expected {json.dumps(expected)}, got {json.dumps(value)[:60]}")


def _int_list(value: Any, where: str, check: Callable[[Any, str], int]) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise FormatError(f"{where}: expected an array of integers, got {json.dumps(value)[:40]}")
    return tuple(check(v, f"{where}[{i}]") for i, v in enumerate(value))


def _i16(v: Any, where: str) -> int:
    return _int(v, where, I16_MIN, I16_MAX)


def _dim(v: Any, where: str) -> int:
    return _int(v, where, 0, MAX_WIDTH)


def _width(v: Any, where: str) -> int:
    """A layer's feature count: at least 1 (a zero-width layer computes nothing and has no weight)."""
    n = _int(v, where, 0, MAX_WIDTH)
    if n == 0:
        raise FormatError(f"{where}: is 0; a linear layer needs at least one feature on each side")
    return n


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, list) and len(value) > MAX_RANK:
        raise FormatError(f"{where}: has {len(value)} dims; at most {MAX_RANK} are accepted")
    shape = _int_list(value, where, _dim)
    if math.prod(shape) > MAX_VALUES:
        raise FormatError(f"{where}: {list(shape)} holds {math.prod(shape)} values; at most {MAX_VALUES} are accepted")
    return shape


def _layer(value: Any, where: str) -> LayerRecord:
    if not isinstance(value, dict):
        raise FormatError(f"{where}: expected a layer object, got {json.dumps(value)[:40]}")
    kind = value.get("kind")
    if kind == "relu":
        _object(value, where, ("kind",))
        return ReluRecord()
    if kind != "linear":
        raise FormatError(f"{where}.kind: expected \"linear\" or \"relu\", got {json.dumps(kind)}")
    _object(value, where, LINEAR_KEYS)
    n_in = _width(value["in_features"], f"{where}.in_features")
    n_out = _width(value["out_features"], f"{where}.out_features")
    if n_in * n_out > MAX_VALUES:
        raise FormatError(f"{where}: a {n_in}x{n_out} weight holds {n_in * n_out} values; at most {MAX_VALUES} "
                          f"are accepted")
    if _shape(value["weight_shape"], f"{where}.weight_shape") != (n_in, n_out):
        raise FormatError(f"{where}.weight_shape: expected [{n_in}, {n_out}] ([in_features, out_features]), "
                          f"got {value['weight_shape']}")
    weight = _int_list(value["weight"], f"{where}.weight", _i16)
    if value["bias_shape"] is None or value["bias"] is None:
        if value["bias_shape"] is not None or value["bias"] is not None:
            missing = "bias" if value["bias"] is None else "bias_shape"
            raise FormatError(f"{where}.{missing}: is null while the other is not (both null means no bias)")
        return LinearRecord(n_in, n_out, weight, None)
    if _shape(value["bias_shape"], f"{where}.bias_shape") != (n_out,):
        raise FormatError(f"{where}.bias_shape: expected [{n_out}] ([out_features]), got {value['bias_shape']}")
    return LinearRecord(n_in, n_out, weight, _int_list(value["bias"], f"{where}.bias", _i16))


def fixture_from_dict(doc: Any) -> Fixture:
    doc = _object(doc, "", TOP_KEYS)
    _exact(doc["format"], "format", FORMAT)
    _exact(doc["version"], "version", VERSION)
    _exact(doc["dtype"], "dtype", DTYPE_NAME)
    s = _int(doc["scale_log2"], "scale_log2", 0, 15)
    _exact(doc["scale"], "scale", 1 << s)
    _exact(doc["rounding"], "rounding", ROUNDING)
    _exact(doc["overflow"], "overflow", OVERFLOW)
    if not isinstance(doc["layers"], list):
        raise FormatError(f"layers: expected an array of layer objects, got {json.dumps(doc['layers'])[:40]}")
    layers = tuple(_layer(v, f"layers[{i}]") for i, v in enumerate(doc["layers"]))
    input_shape = _shape(doc["input_shape"], "input_shape")
    values = _int_list(doc["input"], "input", _i16)
    output_shape = _shape(doc["output_shape"], "output_shape")
    output = _int_list(doc["output"], "output", _i16)
    problems = chain_problems(layers, input_shape, len(values), output_shape, len(output))
    if problems:
        field, problem = problems[0]
        raise FormatError(f"{field}: {problem}")
    return Fixture(s, layers, input_shape, values, output_shape, output)


def fixture_from_json(text: str | bytes, where: str = "the fixture") -> Fixture:
    """Parse fixture JSON text; FormatError (naming the field) for anything malformed."""
    return fixture_from_dict(json_safe.loads(text, where, FIXTURE_LIMITS))
