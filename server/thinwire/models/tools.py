"""Tools a model may call: declared with `@tool` on an agent's methods (or functions), their
JSON Schema built from the Python signature and docstring, their arguments validated
before the call.

    class Librarian(ChatAgent):
        @tool
        async def search(self, query: str, limit: int = 5) -> list[str]:
            \"\"\"Search the catalogue.\"\"\"

        @tool(approval=lambda arguments: Approval(f"Lend {arguments['title']}?"))
        async def lend(self, title: str) -> str:
            \"\"\"Lend a book to the user.\"\"\"
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from thinwire.interrupts import Approval

__all__ = ["ApprovalRule", "ToolSpec", "ToolWarning", "tool", "tools_of"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

#: An approval for every call, or one decided from the call's (validated) arguments:
#: None lets the call run without asking.
ApprovalRule = Approval | Callable[[Mapping[str, Any]], Approval | None] | None


class ToolInputError(ValueError):
    """The model's arguments do not fit the tool: told to the model, not raised."""


class ToolWarning(UserWarning):
    """A tool the model is told too little about: no docstring (an empty description),
    or a parameter without a type hint (a schema that accepts anything)."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    function: Callable[..., Awaitable[Any]]
    arguments: type[BaseModel]
    approval: ApprovalRule = None

    @property
    def schema(self) -> dict[str, Any]:
        """The tool as the chat API describes it."""
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def validate(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the function takes them; `ToolInputError` when they do not
        fit, with what pydantic found (for the model to correct itself)."""
        try:
            model = self.arguments.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise ToolInputError(f"invalid arguments: {problems}") from exc
        return {name: getattr(model, name) for name in type(model).model_fields}

    def approval_for(self, arguments: Mapping[str, Any]) -> Approval | None:
        if self.approval is None or isinstance(self.approval, Approval):
            return self.approval
        return self.approval(arguments)

    def bound(self, owner: object) -> Callable[..., Awaitable[Any]]:
        """The function to call: bound to the agent for a method; its output as JSON."""
        function = self.function
        method = "self" in inspect.signature(function).parameters

        async def call(**arguments: Any) -> Any:
            output = await (function(owner, **arguments) if method else function(**arguments))
            return to_jsonable_python(output)

        return call


@overload
def tool(function: F, /) -> F: ...


@overload
def tool(*, name: str | None = None, approval: ApprovalRule = None) -> Callable[[F], F]: ...


def tool(
    function: F | None = None,
    /,
    *,
    name: str | None = None,
    approval: ApprovalRule = None,
) -> F | Callable[[F], F]:
    """Declare an async method (or function) a tool: its name, its docstring's first
    paragraph as the description, its parameters (type hints, defaults, and pydantic's
    `Annotated[..., Field(description=…)]`) as the JSON Schema of its arguments. With
    `approval`, a person is asked before it runs — always, or when the function given
    returns an `Approval` for the call's arguments."""

    def declare(function: F) -> F:
        check_async(function)
        spec = spec_of(function, name, approval)
        warn_if_undescribed(spec)
        setattr(function, "__thinwire_tool__", spec)  # noqa: B010
        return function

    return declare(function) if function is not None else declare


def spec_of(
    function: Callable[..., Awaitable[Any]], name: str | None, approval: ApprovalRule
) -> ToolSpec:
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__}: *args and **kwargs have no schema")
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    arguments = create_model(
        f"{function.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    doc = inspect.getdoc(function) or ""
    return ToolSpec(
        name=name or function.__name__,
        description=doc.split("\n\n", 1)[0].strip(),
        function=function,
        arguments=arguments,
        approval=approval,
    )


def check_async(function: object) -> None:
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"a tool must be an async function: {function!r}")


def warn_if_undescribed(spec: ToolSpec) -> None:
    """Warn of what the model will not be told: it still runs, but the model guesses."""
    function = spec.function
    missing = []
    if not spec.description:
        missing.append("docstring (the model is told no description)")
    untyped = [
        parameter.name
        for parameter in inspect.signature(function).parameters.values()
        if parameter.name != "self" and parameter.annotation is parameter.empty
    ]
    if untyped:
        names = ", ".join(untyped)
        missing.append(f"type hint on {names} (the model is told no type, and any value passes)")
    if missing:
        warnings.warn(
            f"tool {spec.name!r} ({function.__qualname__}) has no {' and no '.join(missing)}",
            ToolWarning,
            stacklevel=stacklevel_outside_thinwire(),
        )


#: Where thinwire's own code is: a warning points past it, at the user's code.
PACKAGE = os.path.dirname(os.path.dirname(__file__)) + os.sep


def stacklevel_outside_thinwire() -> int:
    """The `stacklevel` of the first caller outside thinwire, for a warning issued by the
    function that calls this one."""
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(PACKAGE):
        level, frame = level + 1, frame.f_back
    return level


def tools_of(agent: type) -> dict[str, ToolSpec]:
    """The tools an agent class declares: its `@tool` methods, and the `@tool` functions
    in its `tools` attribute, by name. Two of them with one name are refused (a
    `TypeError` naming both); a method overridden in a subclass is that method, not two."""
    found: dict[str, ToolSpec] = {}
    where: dict[str, str] = {}
    candidates = [
        *members_of(agent),
        *((f"{f.__qualname__} in {agent.__name__}.tools", f) for f in getattr(agent, "tools", ())),
    ]
    for place, candidate in candidates:
        spec = getattr(candidate, "__thinwire_tool__", None)
        if not isinstance(spec, ToolSpec):
            continue
        other = found.get(spec.name)
        if other is not None and other is not spec:
            raise TypeError(
                f"{agent.__name__} has two tools named {spec.name!r}: {where[spec.name]} and "
                f"{place}; the model could call only one (give the other its own name: "
                "@tool(name=...))"
            )
        found[spec.name], where[spec.name] = spec, place
    return found


def members_of(agent: type) -> list[tuple[str, Any]]:
    """Attributes of the class and its bases, each with where it is defined; one a
    subclass overrides is the subclass's."""
    members: dict[str, tuple[str, Any]] = {}
    for klass in reversed(agent.__mro__):
        for name, value in vars(klass).items():
            members[name] = (f"{klass.__qualname__}.{name}", value)
    return list(members.values())
