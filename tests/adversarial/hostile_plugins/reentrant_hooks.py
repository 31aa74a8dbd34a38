"""Asks the process's backend_api from inside its own hooks (the import of rumus itself included): reading
schemas must work on the registries loaded so far; running an op must be a clear RumusError, not a hang."""

from __future__ import annotations

from typing import Any

import rumus  # noqa: F401  (a plugin that imports the framework it plugs into)
from rumus import backend_api
from rumus_contracts import KernelRegistry, OpRegistry, RumusError, hookimpl

from ._common import negate_cpu, schema

SEEN: dict[str, Any] = {}


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    SEEN["add_inputs"] = backend_api.op_schema("add").inputs  # a core op: registered before any plugin
    SEEN["plugins_is_partial"] = "reentrant_op" not in backend_api.plugins().ops.names()
    registry.register(schema("reentrant_op"))


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    SEEN["own_schema"] = backend_api.op_schema("reentrant_op").name
    try:
        rumus.ones(2)
    except RumusError as exc:
        SEEN["running_an_op"] = str(exc)
    registry.register("reentrant_op", "cpu", negate_cpu)
