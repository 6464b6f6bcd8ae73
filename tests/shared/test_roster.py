"""One home each: the services' names (coachbus.roster) and the severity order
(coachbus.safety.severity), and the lists derived from them."""

from __future__ import annotations

from typing import get_args

import pytest

from coachbus.contracts import AGENTS, HumanReviewRequest
from coachbus.roster import AGENT_SERVICES, GATEWAY, SERVICES, SYNTH, WORKERS
from coachbus.safety.severity import SEVERITY_RANK

pytestmark = pytest.mark.unit


def test_services_are_the_workers_then_synth_then_the_gateway() -> None:
    assert WORKERS == AGENTS
    assert (*AGENTS, SYNTH) == AGENT_SERVICES
    assert (*AGENTS, SYNTH, GATEWAY) == SERVICES
    assert len(set(SERVICES)) == len(SERVICES) == 7


def test_every_list_of_services_is_the_roster() -> None:
    from coachbus.embedded import supervisor
    from coachbus.embedded.stack import StackConfig
    from coachbus.settings import CoachbusSettings

    assert supervisor.SERVICES == SERVICES
    assert StackConfig().services == SERVICES
    assert CoachbusSettings().synth_required_agents == list(WORKERS)


def test_severity_order_and_the_review_contract_agree() -> None:
    assert sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__) == [
        "low",
        "moderate",
        "high",
        "critical",
    ]
    review_levels = get_args(HumanReviewRequest.model_fields["severity"].annotation)
    assert set(review_levels) == set(SEVERITY_RANK)
