"""AG-UI (protocol 1.0, as `@ag-ui/client` speaks it): CopilotKit-style clients over thinwire.

    all_routes += ag_ui_routes(server)    # create_app does this

A client keeps its `HttpAgent`, pointed at `/ag-ui/{agent}`; the agent, its memory and
its rules are thinwire's. Of the `RunAgentInput` it posts, the server reads the newest
user message or the answer to an interrupt (`request`); the thread id names one of the
caller's conversations (`thinwire.foreign_ids`); the run's public frames stream as AG-UI
events (`events`). docs/interop.md has the map.
"""

from __future__ import annotations

from thinwire.agui.routes import ag_ui_routes

__all__ = ["ag_ui_routes"]
