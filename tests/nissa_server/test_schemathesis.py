"""Property-based checks of the OpenAPI document against a real server: no 5xx, responses conform."""

import asyncio

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.support import events_for, ingest_events, running_server

TOKEN = "fuzz-token"
pytestmark = pytest.mark.timeout(300)  # every operation 12 times: 30 s idle, 97 s on a busy machine


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("fuzz"), token=TOKEN, read_auth=True) as url:
        # Something to find: a run (so some generated paths hit real rows).
        asyncio.run(ingest_events(url, events_for("r1", 5, started=True), token=TOKEN))
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api")


LANGUAGES = {("GET", "/runs"), ("GET", "/runs-table"), ("GET", "/run-groups")}
"""Operations with a parameter in a language of its own (``q``, ``sort``: ``leyline.query``) that a schema cannot
spell: a mistake in one is a documented 400, not a refusal of data the schema allows."""


CROSS_FIELD = {("POST", "/sweeps")}
"""Operations whose body has rules across its fields that JSON Schema cannot spell (a sweep spec: ``min`` below
``max``, a range or a list, grid's lists, pbt's ``parallel`` at least its ``trials``): a body that breaks one is
a documented 422 naming the key and the rule (``tests/leyline/test_sweeps.py`` holds each), not a refusal of data
the schema allows."""


def _check(case, headers):
    case.headers = {**(case.headers or {}), **headers}
    lenient = LANGUAGES | CROSS_FIELD
    excluded = [positive_data_acceptance] if (case.method.upper(), case.path) in lenient else []
    case.call_and_validate(excluded_checks=excluded)


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors_and_responses_match_the_schema(case):
    _check(case, {"Authorization": f"Bearer {TOKEN}"})


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_without_the_token_no_server_errors_and_refusals_match_the_schema(case):
    _check(case, {})
