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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from thinwire.interrupts import Approval

__all__ = ["ApprovalRule", "ToolSpec", "tool", "tools_of"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

#: An approval for every call, or one decided from the call's (validated) arguments:
#: None lets the call run without asking.
ApprovalRule = Approval | Callable[[Mapping[str, Any]], Approval | None] | None


class ToolInputError(ValueError):
    """The model's arguments do not fit the tool: told to the model, not raised."""


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
        setattr(function, "__thinwire_tool__", spec_of(function, name, approval))  # noqa: B010
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


def tools_of(agent: type) -> dict[str, ToolSpec]:
    """The tools an agent class declares: its `@tool` methods, and the `@tool` functions
    in its `tools` attribute, by name."""
    found: dict[str, ToolSpec] = {}
    candidates = [*vars_of(agent), *getattr(agent, "tools", ())]
    for candidate in candidates:
        spec = getattr(candidate, "__thinwire_tool__", None)
        if isinstance(spec, ToolSpec):
            found[spec.name] = spec
    return found


def vars_of(agent: type) -> list[Any]:
    """Attributes of the class and its bases, most derived last (it wins)."""
    values: dict[str, Any] = {}
    for klass in reversed(agent.__mro__):
        values.update(vars(klass))
    return list(values.values())
