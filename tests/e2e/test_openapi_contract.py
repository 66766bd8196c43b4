"""The running server against its own description: every operation of /api/openapi.json called
with generated input (schemathesis over a real `tracker serve` and Redis), and every answer
must be one the document declares: no 5xx, a declared status, content type and body shape.

The run may call every admin operation, the destructive ones too (delete the project, clear a
queue, revoke a secret): each generated call is made as drawn (random names: mostly refused) and
again on a real project with URL items, which is put back whenever a call deleted it. Afterwards
no item may be in two places, and the census still answers.
"""

import os

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from support.census import places
from tracker_core.access import tokens
from tracker_core.admin import census_verbs, item_verbs, project_verbs

pytestmark = pytest.mark.slow

PROJECT = "contract"
NAMES = [f"https://example.com/page/{n}?q=a%20b#frag" for n in range(50)]
# Two calls each (as drawn, and on the real project): ~700 calls, ~15 s. A longer hunt:
# TRACKER_CONTRACT_EXAMPLES=100 (about 2 minutes).
EXAMPLES_PER_OPERATION = int(os.environ.get("TRACKER_CONTRACT_EXAMPLES", "5"))


def no_server_error(ctx, response, case):
    """No 5xx, but for a 503 that asks to retry: the renderer's first answer for a figure it
    has not rendered yet (tracker_api.public.public_cache), declared; counted and bounded."""
    if response.status_code == 503 and response.headers.get("retry-after"):
        RETRY_LATER.append(f"{case.method} {case.path}")
        return None
    return not_a_server_error(ctx, response, case)


RETRY_LATER: list[str] = []
CHECKS = [
    no_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def _project_back(admin) -> None:
    """PROJECT with its items, made again when a call deleted it."""
    if PROJECT not in project_verbs.list_projects(admin):
        project_verbs.create(admin, PROJECT)
        item_verbs.add(admin, PROJECT, NAMES)


def test_every_answer_matches_the_document(live_server, admin, r):
    _project_back(admin)
    token = tokens.create(admin.conn, "*")[0]
    session = requests.Session()
    document = session.get(live_server.base + "/api/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(document)
    auth = {"Authorization": f"Bearer {token}"}
    called: dict[str, set[int]] = {}  # "METHOD PATH" -> statuses
    taken: set[str] = set()  # the operations answered 200 on the real project

    def call(case) -> int:
        response = case.call_and_validate(
            base_url=live_server.base, session=session, headers=auth, checks=CHECKS, timeout=30
        )
        called.setdefault(f"{case.method} {case.path}", set()).add(response.status_code)
        return response.status_code

    def run(strategy, examples: int) -> None:
        @settings(
            max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=strategy)
        def each(case):
            call(case)
            if "project" in case.path_parameters:
                _project_back(admin)
                case.path_parameters["project"] = PROJECT
                if call(case) == 200:
                    taken.add(f"{case.method} {case.path}")

        each()

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 60, len(operations)
    for operation in operations:
        # The document's examples first (a valid body, a real queue name), then generated input.
        for strategy in schema.get_strategies_from_examples(operation):
            run(strategy, 1)
        run(operation.as_strategy(), EXAMPLES_PER_OPERATION)
    assert len(called) == len(operations)
    assert len(RETRY_LATER) <= len(operations), RETRY_LATER
    # Calls reached the real project and were taken, not only refused: the destructive ones too.
    assert {
        "POST /{project}/request",
        "POST /api/admin/projects/{project}/queues/{queue}/move",
        "POST /api/admin/projects/{project}/queues/{queue}/clear",
        "POST /api/admin/projects/{project}/redo",
    } <= taken, taken
    _project_back(admin)
    twice = [name for name, n in places(r, admin.keys(PROJECT)).items() if n > 1]
    assert not twice, twice[:3]
    assert census_verbs.status(admin, PROJECT)["project"] == PROJECT
