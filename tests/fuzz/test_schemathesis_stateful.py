"""Stateful API fuzzing: schemathesis 4's state machine (`schema.as_state_machine()`, driven
by hypothesis directly — its pytest plugin does not support pytest 9) chains calls through
links it infers from the schema: create a note → get / patch / delete / restore / reindex /
chunks it by the returned id, search and chat over it, create a user → issue a key → revoke
it. Every response must pass schemathesis' checks (no 5xx, documented status codes, content
types and response schemas). Scenarios: AUTONOTE_STATEFUL_EXAMPLES (default 20), each up to
8 steps. Each scenario is its own hypothesis run: the state machine draws from bundles filled
by live responses, so one run's data tree sees the "same" choices produce different draws
(hypothesis' FlakyStrategyDefinition, about ~1 run in 5 with 20 scenarios in one run, with
no failing check behind it). Separate runs keep that check from masking real failures, and
any step that does fail is recorded as it happened, before shrinking replays it. Scenario i
runs with seed AUTONOTE_STATEFUL_SEED + i (default 0): where a CI variable is set,
hypothesis loads its `ci` profile, which derandomizes every run, so without a seed of its own
each scenario repeated the first one's draws (20 copies of one 8-step scenario that never
reached a created note; CI failed on that).

Two checks are adjusted to the documented contract, not silenced:
- `use_after_free`: `DELETE /v1/notes/{id}` moves a note to the trash, where it stays
  readable (and restorable); only `?permanent=true` makes it 404.
- `positive_data_acceptance` on a 412: a schema-valid `If-Match` with a stale version must
  be refused with 412 once the id is real, which only stateful runs reach.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance, use_after_free

from tests.conftest import ADMIN_TOKEN, ServedApp, served_app
from tests.fuzz.targets import record_stats

SCENARIOS = int(os.environ.get("AUTONOTE_STATEFUL_EXAMPLES", "20"))
STEPS = 8
SEED = int(os.environ.get("AUTONOTE_STATEFUL_SEED", "0"))


@pytest.fixture(scope="module")
def served(mongo_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    with served_app(
        mongo_url,
        tmp_path_factory,
        "stateful",
        autonote_max_note_bytes=200_000,
        autonote_max_request_bytes=1_000_000,
        autonote_admin_guesses_per_minute=1_000_000,  # it sends wrong tokens on purpose
    ) as app:
        yield app


def run_stateful(served: ServedApp, scenarios: int) -> Counter[tuple[str, str, int]]:
    """Run the state machine; return how often each (method, path, status) was seen."""
    key = served.new_user("stateful")
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")

    @schema.auth(refresh_interval=None)
    class Keys:
        """The workflow's credentials: the user key, the admin token on admin routes (bad
        credentials are the access-control table's subject, tests/security)."""

        def get(self, case: Any, context: Any) -> str:
            return ADMIN_TOKEN if case.path.startswith("/v1/admin") else key

        def set(self, case: Any, data: str, context: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

    machine = schema.as_state_machine()  # infers the links (Location, ids in bodies)
    transitions = schema.statistic.transitions.total
    assert transitions >= 20, f"only {transitions} links inferred"
    seen: Counter[tuple[str, str, int]] = Counter()
    failures: list[str] = []

    class Workflow(machine):  # type: ignore[misc, valid-type]
        def step(self, input: Any) -> Any:
            try:
                return super().step(input)
            except Exception as exc:
                failures.append(f"{input.case.method} {input.case.path}: {exc!r}"[:2000])
                raise

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": served.url}

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            seen[(case.method.upper(), case.path, response.status_code)] += 1

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            excluded = [use_after_free]
            if response.status_code == 412:
                excluded.append(positive_data_acceptance)
            case.validate_response(
                response,
                additional_checks=additional_checks,
                excluded_checks=excluded,
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    one_scenario = settings(
        max_examples=1,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    for i in range(scenarios):
        try:
            seed(SEED + i)(Workflow).run(settings=one_scenario)
        except Exception as exc:
            raise AssertionError(f"failing steps: {failures or '(none recorded)'}") from exc
    return seen


def test_stateful_workflows_never_fail_a_check(served: ServedApp) -> None:
    seen = run_stateful(served, SCENARIOS)
    steps = sum(seen.values())
    server_errors = {k: v for k, v in seen.items() if k[2] >= 500}
    assert server_errors == {}
    linked_ok = sum(v for (_, path, status), v in seen.items() if "{" in path and status < 300)
    assert linked_ok > 0, f"no linked call reached an existing resource: {seen}"
    print(f"\nstateful: {SCENARIOS} scenarios, {steps} calls, {linked_ok} linked 2xx")
    record_stats({"target": "schemathesis_stateful", "calls": steps, "linked_2xx": linked_ok})
