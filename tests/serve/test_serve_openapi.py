"""GET /openapi.json on a real `rumus serve`: the document of rumus/serve/openapi.py, naming every route the
app has; each documented request example gets a 200 whose body fits the documented response schema, and
/v1/generate takes OpenAI's `max_tokens` (or refuses a disagreeing pair with 400), never ignores it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from rumus.serve.openapi import openapi_schema  # noqa: E402

from serve_client import ServerProcess, tiny_checkpoint  # noqa: E402

TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
         "null": type(None)}


def fits(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """The ways `value` breaks `schema` (the subset of JSON Schema the document uses); [] when it fits."""
    if "$ref" in schema:
        schema = root["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in schema:
        return [] if any(not fits(value, s, root) for s in schema["oneOf"]) else [f"{value!r} fits no oneOf"]
    kinds = schema.get("type")
    if kinds is not None:
        allowed = tuple(t for k in ([kinds] if isinstance(kinds, str) else kinds) for t in
                        (TYPES[k] if isinstance(TYPES[k], tuple) else (TYPES[k],)))
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            return [f"{value!r} is not {kinds}"]
    problems = []
    if "const" in schema and value != schema["const"]:
        problems.append(f"{value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        problems += [f"missing {k!r}" for k in schema.get("required", []) if k not in value]
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                problems += [f"{k}: {p}" for p in fits(value[k], sub, root)]
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += [f"[{i}]: {p}" for p in fits(item, schema["items"], root)]
    return problems


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    path = str(tmp_path_factory.mktemp("ckpt"))
    tiny_checkpoint(path)
    s = ServerProcess(path, log=os.path.join(str(tmp_path_factory.mktemp("log")), "server.log"))
    yield s
    s.stop()


def test_the_server_serves_the_document_and_it_names_every_route(server: ServerProcess) -> None:
    status, _, doc = server.request("GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1") and doc["paths"] == openapi_schema()["paths"]
    routes = _routes()
    assert len(routes) >= 6 and routes == set(doc["paths"]), routes ^ set(doc["paths"])


def _routes() -> set[str]:
    # the paths Server registers, read from its constructor's source (building one needs a model and a thread)
    import inspect
    import re

    from rumus.serve import api
    return set(re.findall(r'Route\("([^"]+)"', inspect.getsource(api.Server.__init__)))


@pytest.mark.parametrize("path", ["/v1/generate", "/v1/completions", "/v1/embeddings", "/health"])
def test_every_documented_example_gets_a_response_that_fits_its_schema(server: ServerProcess, path: str) -> None:
    doc = openapi_schema()
    (method, op), = doc["paths"][path].items()
    body = op["requestBody"]["content"]["application/json"]["schema"]["example"] if method == "post" else None
    status, _, got = server.request(method.upper(), path, body)
    assert status == 200, got
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert fits(got, schema, doc) == [], got


def test_a_bad_request_fits_the_error_schema(server: ServerProcess) -> None:
    status, _, got = server.request("POST", "/v1/generate", {"token_ids": []})
    assert status == 400 and fits(got, {"$ref": "#/components/schemas/Error"}, openapi_schema()) == []


def test_generate_takes_max_tokens_as_openai_does(server: ServerProcess) -> None:
    prompt = [72, 105]
    status, _, a = server.request("POST", "/v1/generate", {"token_ids": prompt, "max_tokens": 3})
    assert status == 200 and len(a["generated_ids"]) == len(prompt) + 3, a
    status, _, b = server.request("POST", "/v1/generate", {"token_ids": prompt, "max_new_tokens": 3})
    assert status == 200 and b["generated_ids"] == a["generated_ids"]
    status, _, c = server.request("POST", "/v1/generate", {"token_ids": prompt, "max_tokens": 3, "max_new_tokens": 4})
    assert status == 400 and "disagree" in c["error"], c


def test_the_validator_sees_a_misfit() -> None:
    doc = openapi_schema()
    schema = doc["paths"]["/v1/generate"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert fits({"generated_ids": [1, "x"]}, schema, doc) == ["missing 'latency_ms'", "generated_ids: [1]: 'x' is "
                                                                                      "not integer"]
