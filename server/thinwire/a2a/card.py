"""The agent card: what an A2A client learns about an agent before it sends anything.

Everything on it is public by construction: the agent's name, the `description` and
`skills` its class declares, the JSON-RPC URL, and how to authenticate. `identify` is a
function the kit cannot look into, so the app says what it reads (`A2A(security=…)`);
with `thinwire.anonymous` there is nothing to say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from thinwire.a2a import models
from thinwire.agent import Agent
from thinwire.contexts import AgentFactory

__all__ = ["A2A", "Security", "Skill", "agent_card"]

#: Text in, text out; JSON in (a message's data, a decision) and out (an interrupt).
MODES = ["text/plain", "application/json"]


@dataclass(frozen=True)
class Skill:
    """Something the agent can be asked to do, as its card lists it (public)."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Security:
    """The credential the app's `identify` reads, as the card describes it to A2A clients.

    It describes; it does not check: `identify` stays the only judge of every request.
    """

    kind: Literal["bearer", "header", "cookie"]
    #: The header or cookie that carries the credential.
    name: str = "Authorization"
    #: For `bearer`: the token's format, a hint such as "JWT".
    bearer_format: str = ""
    description: str = ""

    @classmethod
    def bearer(cls, bearer_format: str = "", description: str = "") -> Security:
        """`Authorization: Bearer <token>`."""
        return cls("bearer", bearer_format=bearer_format, description=description)

    @classmethod
    def header(cls, name: str, description: str = "") -> Security:
        """A key in a header of the app's choosing (`X-Api-Key`, a proxy's user header)."""
        return cls("header", name, description=description)

    @classmethod
    def cookie(cls, name: str, description: str = "") -> Security:
        """A session cookie."""
        return cls("cookie", name, description=description)

    def scheme(self) -> dict[str, dict[str, str]]:
        """The card's `SecurityScheme`, in its JSON form."""
        extra = {"description": self.description} if self.description else {}
        if self.kind == "bearer":
            fields = {"scheme": "Bearer", **extra}
            if self.bearer_format:
                fields["bearerFormat"] = self.bearer_format
            return {"httpAuthSecurityScheme": fields}
        return {"apiKeySecurityScheme": {"location": self.kind, "name": self.name, **extra}}

    @property
    def challenge(self) -> dict[str, str]:
        """The `WWW-Authenticate` header a 401 names, where HTTP defines one."""
        return {"WWW-Authenticate": "Bearer"} if self.kind == "bearer" else {}


@dataclass(frozen=True)
class A2A:
    """How the A2A face describes the app's agents: `create_app(..., a2a=A2A(...))`.

    `security` is the credential `identify` reads (None: the card names none, which is
    right for `thinwire.anonymous`); `version` is the agents' version on their cards.
    """

    security: Security | None = None
    version: str = "1.0.0"


def agent_card(name: str, factory: AgentFactory, url: str, options: A2A) -> models.AgentCard:
    """The card of the agent `name`, whose JSON-RPC endpoint is at `url`."""
    kind = factory if isinstance(factory, type) and issubclass(factory, Agent) else None
    description = (kind.description if kind else "") or f"{name}: an agent served by thinwire."
    skills = list(kind.skills) if kind else []
    if not skills:  # a card lists at least one
        skills = [Skill(name, name, description, ("chat",))]
    security = options.security
    return models.AgentCard(
        name=name,
        description=description,
        supported_interfaces=[models.AgentInterface(url=url)],
        version=options.version,
        capabilities=models.AgentCapabilities(),
        security_schemes={"thinwire": security.scheme()} if security else None,
        security_requirements=(
            [models.SecurityRequirement(schemes={"thinwire": {"list": []}})] if security else None
        ),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[
            models.AgentSkill(
                id=skill.id,
                name=skill.name,
                description=skill.description,
                tags=list(skill.tags),
                examples=list(skill.examples) or None,
            )
            for skill in skills
        ],
    )
