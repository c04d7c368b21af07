"""Statuses are one enum from the engine to the API: the web's pod statuses and verdict outcomes are the
engine's (`scheduler_core.PodStatus`, `scheduler_core.Outcome`), and the OpenAPI schema lists them."""

import yaml
from django.core.management import call_command

from numaweb.pages.tables import FAILED
from numaweb.scheduling.models import PodStatus
from numaweb.scheduling.results import OUTCOMES
from numaweb.worker.models import RunStatus
from scheduler_core import Outcome
from scheduler_core import PodStatus as EnginePodStatus


def test_the_webs_pod_statuses_are_the_engines():
    """A new engine status fails here until the web's PodStatus (the Placement column's choices) has it."""
    assert PodStatus.values == [s.value for s in EnginePodStatus]
    assert all(PodStatus[s.name] == s for s in EnginePodStatus)


def test_outcomes_are_the_engines():
    assert set(OUTCOMES) == set(Outcome) and len(OUTCOMES) == len(Outcome)
    assert set(FAILED) <= set(Outcome)


def test_the_schema_lists_the_enums(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    schemas = yaml.safe_load(out.read_text())["components"]["schemas"]
    assert schemas["PodStatusEnum"]["enum"] == PodStatus.values
    assert schemas["OutcomeEnum"]["enum"] == [o.value for o in Outcome]
    assert schemas["RunStatusEnum"]["enum"] == RunStatus.values
    status = {name: schemas[name]["properties"]["status"] for name in ("Placement", "Session", "Comparison",
                                                                        "MakeRoom")}
    refs = {name: (s.get("$ref") or s["allOf"][0]["$ref"]).rsplit("/", 1)[-1] for name, s in status.items()}
    assert refs == {"Placement": "PodStatusEnum", "Session": "RunStatusEnum", "Comparison": "RunStatusEnum",
                    "MakeRoom": "RunStatusEnum"}
    group = schemas["VerdictGroup"]["properties"]["outcome"]
    assert group["allOf"][0]["$ref"].endswith("/OutcomeEnum")
