"""Every drill by name, in the order a run goes through them."""

from __future__ import annotations

from chaos.drill import Body
from chaos.drills import diskfull, floods, redis_outage, replica, sigkill, sigterm

__all__ = ["DRILLS"]

DRILLS: dict[str, Body] = {
    "sigkill": sigkill.drill,
    "sigterm": sigterm.drill,
    "diskfull": diskfull.drill,
    "redis": redis_outage.drill,
    "replica": replica.drill,
    "floods": floods.drill,
}
