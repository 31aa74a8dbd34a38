"""A Hugging Face-style model directory: `config.json` + `model.safetensors`, read and written the same way for
every model the server runs (the GPT-2 LM, the BERT encoder). Files are written to a temporary name and
renamed, so an interrupted save never leaves a half-written checkpoint."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rumus_contracts import FormatError

if TYPE_CHECKING:
    from ..nn import Module

CONFIG, WEIGHTS = "config.json", "model.safetensors"
M = TypeVar("M", bound="Module")


def write_model_dir(directory: str | os.PathLike[str], state: Mapping[str, Any], config_json: str) -> None:
    from ..io.files import atomic_write
    from ..io.safetensors import save_file
    os.makedirs(directory, exist_ok=True)
    save_file(dict(state), os.path.join(directory, WEIGHTS), metadata={"format": "pt"})
    atomic_write(os.path.join(directory, CONFIG), config_json.encode("utf-8"))


def read_model_dir(directory: str | os.PathLike[str], what: str) -> tuple[str, dict[str, Any]]:
    """(path of config.json, the weights); a FormatError names the missing file."""
    from ..io.safetensors import load_file
    cfg_path, weights = os.path.join(directory, CONFIG), os.path.join(directory, WEIGHTS)
    for p in (cfg_path, weights):
        if not os.path.isfile(p):
            raise FormatError(f"{directory}: {what} directory needs {CONFIG} and {WEIGHTS}; "
                              f"{os.path.basename(p)} is missing")
    return cfg_path, dict(load_file(weights))


def load_model_dir(directory: str | os.PathLike[str], what: str, build: Callable[[str], M],
                   load_state: Callable[[M, Mapping[str, Any]], None], device: Any = None) -> M:
    """The model of a directory read by read_model_dir: `build(path of config.json)`, its weights loaded by
    `load_state`, moved to `device` (unless None), in eval mode."""
    cfg_path, state = read_model_dir(directory, what)
    model = build(cfg_path)
    load_state(model, state)
    if device is not None:
        model.to(device)
    model.eval()
    return model


def read_config_fields(path: str | os.PathLike[str], fields: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The entries of a config.json that name one of `fields` (a config dataclass's defaults); others, such
    as Hugging Face's `architectures`, are ignored."""
    from ..io.json_safe import loads
    with open(path, "rb") as f:
        raw = loads(f.read(), str(path))
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: {what} must be a JSON object")
    return {k: raw[k] for k in fields if k in raw}


def check_config(config: object, positive: Sequence[str], width: str, heads: str) -> None:
    """A model config dataclass's checks (FormatError naming the class and the field): each field in `positive`
    a positive int, and the model width a multiple of the attention heads."""
    cls = type(config).__name__
    for name in positive:
        value = getattr(config, name)
        if not isinstance(value, int) or value <= 0:
            raise FormatError(f"{cls}.{name} must be a positive int, got {value!r}")
    if getattr(config, width) % getattr(config, heads):
        raise FormatError(f"{cls}: {width} {getattr(config, width)} is not a multiple of {heads} "
                          f"{getattr(config, heads)}")
