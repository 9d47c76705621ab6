"""Schemathesis against the gateway's own OpenAPI schema: no 5xx, whatever the input (a fresh seed each run: seeding.py).

Driven through hypothesis directly (schemathesis's pytest plugin does not load under pytest 9).
"""

from __future__ import annotations

import schemathesis
from hypothesis import given
from schemathesis.checks import not_a_server_error

from tests.fuzz.seeding import fuzzed


def test_no_server_errors(server):
    schema = schemathesis.openapi.from_url(f"{server.http_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/audio/speech", "/v1/audio/voices", "/v1/models"}
    cases: dict[str, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @fuzzed(max_examples=25)
        def exercise(case) -> None:
            for key in [k for k in (case.headers or {}) if k.lower() == "x-request-timeout"]:
                del case.headers[key]  # a caller's own tiny deadline is a fair 504
            if isinstance(case.body, dict) and isinstance(case.body.get("input"), str):
                case.body["input"] = case.body["input"][:200]  # short synthesis; length limits have their own tests
            since = server.log_path.stat().st_size
            label = f"{case.method.upper()} {case.path}"
            cases[label] = cases.get(label, 0) + 1
            response = case.call(timeout=60)
            case.validate_response(response, checks=(not_a_server_error,))
            assert "Traceback" not in server.log_path.read_text(errors="replace")[since:]

        exercise()
        assert server.alive(), operation.path
    print(f"schemathesis cases: {sum(cases.values())} {cases}")  # shown with -s; long runs quote the total
