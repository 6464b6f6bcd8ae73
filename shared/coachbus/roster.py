"""The services of the pipeline by name: the one list every other list derives from.

The five workers a turn fans out to are the contract's (``coachbus.contracts.AGENTS``:
their results travel under those names). Synth joins their results and the gateway
is the door; together they are the seven services, each a process
(``services.<name>.main:app``), a Kafka principal (``coachbus-<name>``, see
coachbus.acl), a consumer group and a generated AsyncAPI document.

A module of its own, importing nothing but the contract, so that the settings (which
check ``COACHBUS_SYNTH_REQUIRED_AGENTS`` against it) and the topics can both use it.
"""

from __future__ import annotations

from typing import Final

from coachbus.contracts.payloads import AGENTS, AgentName

SYNTH: Final = "synth"
GATEWAY: Final = "gateway"

# The workers: each reads user-messages and publishes one result on agent.<name>.
WORKERS: Final[tuple[AgentName, ...]] = AGENTS
# Every service on the bus runtime (a consumer group on user-messages): the workers
# and Synth. The replay sandbox runs exactly these.
AGENT_SERVICES: Final[tuple[str, ...]] = (*WORKERS, SYNTH)
# All seven services; ``coachbus run`` spawns them in this order (the door last).
SERVICES: Final[tuple[str, ...]] = (*AGENT_SERVICES, GATEWAY)

__all__ = ["AGENT_SERVICES", "GATEWAY", "SERVICES", "SYNTH", "WORKERS"]
