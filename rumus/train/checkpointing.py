"""Resumable training checkpoints: model + optimizer + scheduler + counters + RNG state.

A checkpoint is a directory holding `state-<step>.safetensors` (model parameters and buffers under
"model.", optimizer state tensors under "optimizer.<param index>.<name>") and `trainer.json` (everything
else, plus the name and SHA-256 of the safetensors file). Both are written atomically, the tensors
first and the JSON last, and the old tensors file is removed only after the new JSON is in place: a
crash at any moment leaves a JSON that points at a complete, matching tensors file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from rumus_contracts import FormatError, RumusError

from ..io import json_safe, load_file, save_file
from ..io.files import atomic_write
from ..tensor import Tensor

FORMAT = "rumus-train-checkpoint"
VERSION = 1
SIDECAR = "trainer.json"


def _split_optimizer_state(sd: Mapping[str, Any]) -> tuple[dict[str, Tensor], dict[str, Any]]:
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, Any] = {}
    for idx, entries in sd["state"].items():
        plain = {}
        for name, value in entries.items():
            if isinstance(value, Tensor):
                tensors[f"optimizer.{idx}.{name}"] = value
            else:
                plain[name] = value
        scalars[str(idx)] = plain
    return tensors, {"state": scalars, "param_groups": sd["param_groups"]}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save(directory: str, model_state: Mapping[str, Tensor], optimizer_state: Mapping[str, Any] | None,
         extra: Mapping[str, Any], step: int) -> str:
    """Write a checkpoint into `directory` (created if missing); returns the tensors file's path."""
    os.makedirs(directory, exist_ok=True)
    tensors = {f"model.{k}": v for k, v in model_state.items()}
    opt_json: dict[str, Any] | None = None
    if optimizer_state is not None:
        opt_tensors, opt_json = _split_optimizer_state(optimizer_state)
        tensors.update(opt_tensors)
    name = f"state-{step}.safetensors"
    path = os.path.join(directory, name)
    save_file(tensors, path, metadata={"format": FORMAT, "step": str(step)})
    previous = _previous_tensors_file(directory)
    sidecar = {"format": FORMAT, "version": VERSION, "tensors_file": name, "tensors_sha256": _sha256(path),
               "step": step, "optimizer": opt_json, **extra}
    atomic_write(os.path.join(directory, SIDECAR), json.dumps(sidecar, indent=2, sort_keys=True).encode())
    if previous and previous != name:
        try:
            os.unlink(os.path.join(directory, previous))
        except OSError:
            pass
    return path


def _previous_tensors_file(directory: str) -> str | None:
    """The tensors file the current sidecar names, if it is a plain file name in `directory`: a corrupt or
    hostile sidecar must neither crash a save nor make it delete a file elsewhere ("../x")."""
    try:
        sidecar = json_safe.load(os.path.join(directory, SIDECAR))
    except (OSError, RumusError):
        return None
    name = sidecar.get("tensors_file") if isinstance(sidecar, dict) else None
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        return None
    return name


def load(directory: str, device: Any = None) -> tuple[dict[str, Tensor], dict[str, Any] | None, dict[str, Any]]:
    """(model state, optimizer state_dict or None, the sidecar) of a checkpoint directory."""
    sidecar_path = os.path.join(directory, SIDECAR)
    sidecar = json_safe.load(sidecar_path, f"{sidecar_path} (the checkpoint sidecar)")
    if not isinstance(sidecar, dict) or sidecar.get("format") != FORMAT or sidecar.get("version") != VERSION:
        raise FormatError(f"{sidecar_path}: not a {FORMAT} version {VERSION} sidecar")
    name, digest = sidecar.get("tensors_file"), sidecar.get("tensors_sha256")
    # a plain file name in the checkpoint directory: a hostile sidecar must not point elsewhere
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        raise FormatError(f"{sidecar_path}: tensors_file must be a file name inside the checkpoint directory, "
                          f"got {str(name)[:80]!r}")
    if not isinstance(digest, str):
        raise FormatError(f"{sidecar_path}: tensors_sha256: expected a hex string, got {str(digest)[:80]!r}")
    path = os.path.join(directory, sidecar["tensors_file"])
    if not os.path.exists(path):
        raise FormatError(f"{directory}: the tensors file {sidecar['tensors_file']} named by {SIDECAR} is missing")
    if _sha256(path) != sidecar["tensors_sha256"]:
        raise FormatError(f"{path}: contents do not match the SHA-256 recorded in {SIDECAR} (a partial write?)")
    tensors = load_file(path, device=device)
    model = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    optimizer: dict[str, Any] | None = None
    opt_json = sidecar.get("optimizer")
    if opt_json is not None:
        try:
            state: dict[int, dict[str, Any]] = {int(i): dict(s) for i, s in opt_json["state"].items()}
            for key, value in tensors.items():
                if key.startswith("optimizer."):
                    _, idx, entry = key.split(".", 2)
                    state.setdefault(int(idx), {})[entry] = value
            optimizer = {"state": state, "param_groups": opt_json["param_groups"]}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{sidecar_path}: optimizer: malformed optimizer state ({type(exc).__name__}: "
                              f"{str(exc)[:80]})") from None
    return model, optimizer, sidecar
