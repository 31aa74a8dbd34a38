"""Writing an ONNX file so that a crash at any moment leaves the previous model loadable.

A model with external data is two files, and no rename moves two files at once. The model file names
its data file, so each export's data file gets a name of its own, `<model>.<pid>-<random>.data`:

1. model and data are written, checked and shape-inferred inside a temp folder next to the target;
2. the new data file is moved next to the target (nothing refers to it yet, so the old model still
   loads its old data);
3. one `os.replace` puts the new model in place: this rename is the commit;
4. only then are the previous export's data files removed.

A crash before 3 leaves the old pair untouched (plus an unreferenced file or temp folder); after 3 the
new pair is complete. The next export of the same path removes leftovers whose writing process is gone.
Any OSError (disk full included) is a FileError, and a failed export leaves no file behind.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from typing import Any

from rumus_contracts import FileError, RumusError
from rumus_contracts.onnx_lowering import OnnxExportError

from ..io.files import _fsync_dir, _pid_alive


def _onnx() -> Any:
    from ._build import _onnx as load
    return load()


def _data_pattern(base: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(base)}\.(\d+)-[0-9a-f]{{12}}\.data$")


def _temp_pattern(base: str) -> re.Pattern[str]:
    return re.compile(rf"^\.{re.escape(base)}\.tmp-(\d+)-")


def referenced_data_files(path: str) -> set[str]:
    """The external data file names (relative to the model's folder) an existing ONNX file refers to."""
    onnx = _onnx()
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - no model, or not a readable one: it refers to nothing we know
        return set()
    names: set[str] = set()
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        tensors.extend(a.t for a in node.attribute if a.HasField("t"))
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            names.update(e.value for e in t.external_data if e.key == "location")
    return names


def _owned_by_rumus(base: str, name: str) -> bool:
    """Data files this writer made for `base` (older RUMUS wrote `<model>.data`)."""
    return name == f"{base}.data" or _data_pattern(base).match(name) is not None


def _sweep_leftovers(folder: str, base: str, keep: set[str]) -> None:
    """Unreferenced data files and temp folders of `base` whose writing process is gone."""
    data, temp = _data_pattern(base), _temp_pattern(base)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = data.match(name) or temp.match(name)
        if m is None or name in keep or _pid_alive(int(m.group(1))):
            continue
        full = os.path.join(folder, name)
        if os.path.isdir(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def _checked_external(tmp_model: str) -> None:
    onnx = _onnx()
    try:
        onnx.checker.check_model(tmp_model, full_check=True)
        onnx.shape_inference.infer_shapes_path(tmp_model, tmp_model + ".inferred", check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise OnnxExportError(f"the exported graph failed onnx's checker: {exc}") from None
    os.replace(tmp_model + ".inferred", tmp_model)


def _fsync(path: str) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def save_atomically(model: Any, path: str, external_data: bool) -> Any:
    """Write `model` (already checked when it has no external data) to `path` by the steps above."""
    onnx = _onnx()
    target = os.path.abspath(path)
    folder, base = os.path.dirname(target), os.path.basename(target)
    try:
        tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-{os.getpid()}-", dir=folder)
    except OSError as exc:
        raise FileError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    data_name = f"{base}.{os.getpid()}-{secrets.token_hex(6)}.data"
    moved: str | None = None
    committed = False
    previous: set[str] = set()
    try:
        tmp_model = os.path.join(tmp, base)
        if external_data:
            onnx.save_model(model, tmp_model, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=data_name, size_threshold=0)
            _checked_external(tmp_model)
            if os.path.exists(os.path.join(tmp, data_name)):  # a model without weights writes no data file
                _fsync(os.path.join(tmp, data_name))
                moved = os.path.join(folder, data_name)
                os.replace(os.path.join(tmp, data_name), moved)
        else:
            onnx.save_model(model, tmp_model)
        previous = referenced_data_files(target)
        _fsync(tmp_model)
        os.replace(tmp_model, target)
        committed = True
    except OSError as exc:
        if isinstance(exc, RumusError):
            raise
        raise FileError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    finally:
        if not committed and moved is not None:
            try:
                os.unlink(moved)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    _fsync_dir(folder)
    keep = {data_name} if moved is not None else set()
    for name in previous - keep:
        if _owned_by_rumus(base, name):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
    _sweep_leftovers(folder, base, keep)
    return model
