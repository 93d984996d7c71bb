"""The AI SDK's UI message stream: `useChat` (`ai` 7, `@ai-sdk/react` 4) over thinwire.

    all_routes += ai_sdk_routes(server)    # create_app does this

A React app keeps `useChat` and the SDK's own `DefaultChatTransport`, pointed at
`/ai-sdk/{agent}/chat`; the agent, its memory and its rules are thinwire's. The request
carries the new message only (the server reads its chat id, trigger, `messageId` and
last message, nothing else: see `chat_request`), an edit or a regenerate is taken only
where the page's list and the conversation stay the same (`rewrites`), the chat id names
one of the caller's conversations (`thinwire.foreign_ids`), and the run's public frames
stream as UI message chunks (`chunks`). docs/interop.md has the recipe.
"""

from __future__ import annotations

from thinwire.aisdk.routes import ai_sdk_routes

__all__ = ["ai_sdk_routes"]
