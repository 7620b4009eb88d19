"""The OpenAPI document declares what the routes really answer: a 404 for an id nobody
stored, a 422 that is either the field list or one sentence naming the closest known
name, and the 400/403 any route gives before it runs. Each is checked against a real
answer of the live server, not only against the document."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from live_server import live_server

from kernelkb.service import LocalKnowledge


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors and without a token: the answers
    checked are refusals, none of them reads by meaning or writes."""
    return {"vectors": False}


def _schema_of(document: dict, ref_or_schema: dict) -> dict:
    if "$ref" in ref_or_schema:
        return document["components"]["schemas"][ref_or_schema["$ref"].rsplit("/", 1)[1]]
    return ref_or_schema


def _accepts(document: dict, schema: dict, body: dict) -> bool:
    """Enough of JSON Schema for these answers: a $ref, anyOf, and the type of detail."""
    schema = _schema_of(document, schema)
    if "anyOf" in schema:
        return any(_accepts(document, option, body) for option in schema["anyOf"])
    detail = _schema_of(document, schema["properties"]["detail"])
    kinds = {"string": str, "array": list}
    return isinstance(body.get("detail"), kinds[detail.get("type", "string")])


def test_declared_errors_match_the_answers(knowledge: LocalKnowledge) -> None:
    kb = knowledge
    with live_server(kb) as port:
        base = f"http://127.0.0.1:{port}"
        document = httpx.get(base + "/openapi.json", timeout=30).json()
        answers = {
            ("/experiences/{exp_id}", "get", "404"): httpx.get(base + "/experiences/nope"),
            ("/retrieve", "post", "422"): httpx.post(base + "/retrieve",
                                                     json={"op_type": "sofmax"}),
            ("/insights", "get", "422"): httpx.get(base + "/insights",
                                                   params={"op_type": "sofmax"}),
            ("/retrieve", "post", "422 "): httpx.post(base + "/retrieve", json={"k": "x"}),
            ("/insights", "get", "403"): httpx.get(base + "/insights",
                                                   headers={"Host": "evil.example"}),
        }
        for (path, method, code), answer in answers.items():
            code = code.strip()
            assert str(answer.status_code) == code, (path, answer.text[:200])
            declared = document["paths"][path][method]["responses"]
            assert code in declared, (path, code, sorted(declared))
            schema = declared[code]["content"]["application/json"]["schema"]
            assert _accepts(document, schema, answer.json()), (path, code, answer.text[:200])
