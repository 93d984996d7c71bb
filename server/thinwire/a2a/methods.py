"""The A2A methods, each translated into AgentServer's operations, as the HTTP routes and
the WebSocket commands are: the same runs, ownership and validation whatever the face.

    SendMessage, SendStreamingMessage   send (a new task), or decide (a message on a task
                                        that waits for a person: its answer)
    GetTask                             the transcript, and the frames of a run in progress
    CancelTask                          stop
    SubscribeToTask                     follow, from the run's first frame
    ListTasks                           the conversations list, and their transcripts
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from thinwire.a2a import models
from thinwire.a2a.errors import (
    CONTENT_TYPE_NOT_SUPPORTED,
    INVALID_PARAMS,
    PUSH_NOTIFICATION_NOT_SUPPORTED,
    TASK_NOT_CANCELABLE,
    UNSUPPORTED_OPERATION,
    RpcError,
)
from thinwire.a2a.lookup import Caller, conversation_tasks, latest_task, locate, settle, stamp
from thinwire.a2a.stream import TaskEvents, envelope, first_frames, until_done
from thinwire.a2a.tasks import TaskView, timestamp
from thinwire.errors import Conflict
from thinwire.parsing import ascii_number, check_data, check_message, describe
from thinwire.runlog import FrameSource, StoredFrames
from thinwire.server import active_run_id

__all__ = ["METHODS", "STREAMING"]

M = TypeVar("M", bound=BaseModel)
Method = Callable[[Caller, dict[str, Any]], Awaitable[Any]]

#: An A2A messageId a retry can be told by (thinwire's `messageId`): others are not kept.
MESSAGE_ID = re.compile(r"[A-Za-z0-9_.:-]{8,64}")


def validated(model: type[M], params: dict[str, Any]) -> M:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise RpcError(INVALID_PARAMS, "invalid_request", describe(exc, params)) from exc


def contents(message: models.IncomingMessage) -> tuple[str, Any]:
    """A message's text (its text parts, one per line) and the value of its data part."""
    texts, data = [], []
    for part in message.parts:
        if part.url is not None or part.raw is not None:
            raise RpcError(
                CONTENT_TYPE_NOT_SUPPORTED, "invalid_request", "parts hold text or data, no files"
            )
        if part.text is not None:
            texts.append(part.text)
        elif "data" in part.model_fields_set:
            data.append(part.data)
        else:
            raise RpcError(INVALID_PARAMS, "invalid_request", "message.parts: a part is empty")
    if len(data) > 1:
        raise RpcError(INVALID_PARAMS, "invalid_request", "message.parts: one data part at most")
    return "\n".join(texts), data[0] if data else None


async def start(caller: Caller, request: models.SendMessageRequest) -> tuple[TaskView, FrameSource]:
    """The task a message starts, or continues when it answers one: its frames."""
    message, server = request.message, caller.server
    if message.task_id is not None:
        return await answer(caller, message)
    text, data = contents(message)
    if data is not None and not isinstance(data, dict):
        raise RpcError(INVALID_PARAMS, "invalid_request", "a data part is a JSON object")
    if not text.strip():  # in A2A's terms: a Message has parts, not a text
        texts = any(part.text is not None for part in message.parts)
        said = "its text parts are blank" if texts else "it has no text part (data goes with text)"
        raise RpcError(INVALID_PARAMS, "invalid_request", f"the message says nothing: {said}")
    check_message(text, server.max_message_bytes)
    check_data(data, server.max_data_bytes)
    frames = await server.send(
        caller.agent,
        caller.principal,
        message.context_id,
        text,
        data=data,
        message_id=message.message_id if MESSAGE_ID.fullmatch(message.message_id) else None,
    )
    return TaskView(), frames


async def answer(caller: Caller, message: models.IncomingMessage) -> tuple[TaskView, FrameSource]:
    """A message on a task that waits for a person is the decision: the value of its data
    part if it has one, else its text. It is checked as `POST …/decisions` checks one."""
    assert message.task_id is not None
    found = await locate(caller, message.task_id)
    if message.context_id not in (None, found.context_id):
        raise RpcError(INVALID_PARAMS, "invalid_request", "contextId: not the task's")
    if found.waiting_for is None:
        if found.running is not None:
            raise Conflict("context_busy", "the task is working; it asks when it needs a message")
        raise RpcError(
            UNSUPPORTED_OPERATION, "interrupt_not_found", "the task is over: send a new message"
        )
    text, data = contents(message)
    server = caller.server
    context = await server.context(caller.agent, found.context_id, caller.principal)
    decision = data if data is not None else text.strip()
    frames = await server.decide(context, found.waiting_for["interruptId"], decision)
    # The task's history keeps the question and this answer, as the record now does.
    answered = {"request": found.waiting_for, "status": "answered", "decision": decision}
    view = TaskView(found.context_id, found.task_id, found.said, asked=[*found.asked, answered])
    return view, frames


async def watch(caller: Caller, task_id: str) -> tuple[TaskView, FrameSource | None]:
    """The task as its finished runs left it, and the frames of its run in progress (None
    when no run is working on it)."""
    while True:
        found = await locate(caller, task_id)
        if found.running is None:
            return await settle(caller, found), None
        server = caller.server
        context = await server.context(caller.agent, found.context_id, caller.principal)
        frames = await server.follow(context, 0, run_id=found.running)
        if frames is not None:
            return found.view(), frames
        # That run ended and another began meanwhile: look again.


async def send_message(caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
    """Blocking unless `returnImmediately`: the task once it is over or asks a person."""
    request = validated(models.SendMessageRequest, params)
    view, frames = await start(caller, request)
    configuration = request.configuration
    if configuration.return_immediately:
        view.fold(await first_frames(frames))
    else:
        await until_done(view, frames, None)
    await stamp(caller, view)
    return {"task": view.task(history_length=configuration.history_length).json_body()}


async def send_streaming_message(caller: Caller, params: dict[str, Any]) -> FrameSource:
    request = validated(models.SendMessageRequest, params)
    view, frames = await start(caller, request)
    return TaskEvents(frames, view, caller, request.configuration.history_length)


async def get_task(caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
    request = validated(models.TaskRequest, params)
    view, frames = await watch(caller, request.id)
    if frames is not None:
        view.fold(await first_frames(frames))
        await stamp(caller, view)  # if its run ended meanwhile: when
    return view.task(history_length=request.history_length).json_body()


async def subscribe_to_task(caller: Caller, params: dict[str, Any]) -> FrameSource:
    view, frames = await watch(caller, validated(models.TaskRequest, params).id)
    if frames is not None:
        return TaskEvents(frames, view, caller)
    if view.state in models.TERMINAL:
        raise RpcError(UNSUPPORTED_OPERATION, "no_run", "the task is over: GetTask reads it")
    # It waits for a decision: nothing happens until a message answers it.
    return StoredFrames([(0, envelope(caller.rpc_id, {"task": view.task().json_body()}))])


async def cancel_task(caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
    """Stop the run working on the task, or end its wait for a person; the reply so far
    is kept. Answers once the run has ended (or `send_timeout` has passed)."""
    task_id = validated(models.TaskRequest, params).id
    found = await locate(caller, task_id)
    if found.running is None and found.waiting_for is None:
        raise RpcError(TASK_NOT_CANCELABLE, "no_run", "the task is over")
    server = caller.server
    context = await server.context(caller.agent, found.context_id, caller.principal)
    if found.waiting_for is not None:
        asked = context.record.pending_interrupt or {}
        still = asked.get("interruptId") == found.waiting_for["interruptId"]
    else:
        still = active_run_id(context) == found.running
    if still:  # not a run another message started since
        await server.stop(context)
    view, frames = await watch(caller, task_id)
    if frames is not None:
        await until_done(view, frames, server.send_timeout)
        await stamp(caller, view)
    return view.task().json_body()


async def list_tasks(caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
    """With `contextId`: the tasks of that conversation, newest first. Without: the latest
    task of each of the caller's conversations, the most recently active first (the
    filters then apply within each page)."""
    request = validated(models.ListTasksRequest, params)
    size = request.page_size
    after = request.status_timestamp_after
    since = timestamp(after.timestamp()) if after else ""

    def wanted(view: TaskView) -> bool:
        return request.status in (None, view.state) and view.updated >= since

    if request.context_id is not None:
        tasks = [
            view for view in await conversation_tasks(caller, request.context_id) if wanted(view)
        ]
        offset = ascii_number(request.page_token or "0", len(tasks))
        if offset is None:
            raise RpcError(INVALID_PARAMS, "invalid_request", "pageToken: not one this server gave")
        page, total = tasks[offset : offset + size], len(tasks)
        next_token = str(offset + size) if offset + size < total else ""
    else:
        listed = await caller.server.conversations(
            caller.agent, caller.principal, size, request.page_token
        )
        latest = [await latest_task(caller, c["contextId"]) for c in listed["conversations"]]
        page = [view for view in latest if view is not None and wanted(view)]
        total, next_token = len(page), listed["nextCursor"] or ""
    return {
        "tasks": [
            view.task(
                artifacts=request.include_artifacts, history_length=request.history_length
            ).json_body()
            for view in page
        ],
        "nextPageToken": next_token,
        "pageSize": size,
        "totalSize": total,
    }


async def no_push_notifications(caller: Caller, params: dict[str, Any]) -> None:
    raise RpcError(
        PUSH_NOTIFICATION_NOT_SUPPORTED, "invalid_request", "no push notifications: stream or poll"
    )


async def no_extended_card(caller: Caller, params: dict[str, Any]) -> None:
    raise RpcError(UNSUPPORTED_OPERATION, "invalid_request", "the public card is the only card")


METHODS: dict[str, Method] = {
    "SendMessage": send_message,
    "SendStreamingMessage": send_streaming_message,
    "GetTask": get_task,
    "CancelTask": cancel_task,
    "SubscribeToTask": subscribe_to_task,
    "ListTasks": list_tasks,
    "CreateTaskPushNotificationConfig": no_push_notifications,
    "GetTaskPushNotificationConfig": no_push_notifications,
    "ListTaskPushNotificationConfigs": no_push_notifications,
    "DeleteTaskPushNotificationConfig": no_push_notifications,
    "GetExtendedAgentCard": no_extended_card,
}
#: Methods answered with an SSE stream (the others with one JSON-RPC response).
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})
