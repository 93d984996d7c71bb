"""What `create_app` is given, checked as the app is made: a wrong argument is refused
then, in a sentence naming it, what it must be and what it was — never taken, to become
a 429, 413 or 500 on every request.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from starlette.routing import BaseRoute

from thinwire.agent import Agent
from thinwire.browser import DEFAULT_PORTS, HostCheck, name_of
from thinwire.contexts import AgentFactory
from thinwire.identity import Identify, anonymous

__all__ = [
    "check_agents",
    "check_flag",
    "check_hosts",
    "check_identify",
    "check_number",
    "check_operator_token",
    "check_origins",
    "check_routes",
]

#: An agent's name, a segment of its URLs: "." and ".." are not, as a URL is resolved.
AGENT_NAME = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.-]{1,64}")


def check_agents(agents: Mapping[str, AgentFactory]) -> None:
    """The agents, by name. An Agent class is checked whole (`Agent.check_class`); a
    function making agents cannot be, before it makes one."""
    if not isinstance(agents, Mapping) or not agents:
        raise TypeError('agents is a mapping of names to agent classes: {"demo": DemoAgent}')
    for name, factory in agents.items():
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
            raise ValueError(
                "agent names are 1-64 of A-Z a-z 0-9 _ . -, other than . and .. (which a URL "
                f"cannot hold as a name), not {name!r}"
            )
        if isinstance(factory, Agent):
            raise TypeError(
                f"agents[{name!r}] is an instance: pass the class {type(factory).__name__} "
                "(or a function that makes one), so every conversation gets its own agent"
            )
        if not callable(factory):
            raise TypeError(f"agents[{name!r}] must be an Agent class or a function making one")
        if isinstance(factory, type):
            if not issubclass(factory, Agent):
                raise TypeError(
                    f"agents[{name!r}] must be an Agent class or a function making one, "
                    f"not the class {factory.__name__}, which is no thinwire Agent"
                )
            factory.check_class()


#: The shortest operator token taken: the bearer token alone opens `/admin`.
OPERATOR_TOKEN_LENGTH = 16


def check_operator_token(
    token: str | Sequence[str] | None, name: str = "operator_token"
) -> tuple[str, ...]:
    """The operator tokens, none for no operator API (None, "" or []): a token a guess could
    find, or padded with whitespace (a copy and paste's, which no client sends back), is
    refused now rather than guarding `/admin` weakly. Several are taken while a new one
    replaces an old one on every replica. `name` is what the message calls it (an
    environment variable it came from, say)."""
    if token is None or token == "":
        return ()
    if isinstance(token, str):
        return (checked_token(token, name),)
    if isinstance(token, bytes | bytearray) or not isinstance(token, Sequence):
        raise TypeError(f"{name} must be a string or a list of strings, not {type(token).__name__}")
    return tuple(checked_token(each, f"{name}[{i}]") for i, each in enumerate(token))


def checked_token(token: object, name: str) -> str:
    if not isinstance(token, str):
        raise TypeError(f"{name} must be a string, not {type(token).__name__}")
    if token != token.strip():
        raise ValueError(f"{name} must not start or end with whitespace")
    if not all("!" <= c <= "~" for c in token):
        # An Authorization header carries it: a client sends other characters as bytes
        # no server reads back the same (UTF-8 against Latin-1), and none sends a space.
        raise ValueError(f"{name} must be printable ASCII, without spaces or control characters")
    if len(token) < OPERATOR_TOKEN_LENGTH:
        raise ValueError(
            f"{name} must be at least {OPERATOR_TOKEN_LENGTH} characters, not {len(token)}: "
            "it alone opens the operator API (make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    return token


def check_identify(identify: Identify) -> None:
    """`identify(connection)`: refused now, not as a 500 on every request."""
    wrong = "identify must be a function of the connection (or thinwire.anonymous)"
    if not callable(identify):
        raise TypeError(wrong)
    try:
        signature = inspect.signature(identify)
    except (TypeError, ValueError):  # a callable Python cannot describe: taken on trust
        return
    try:
        signature.bind(object())
    except TypeError:
        raise TypeError(f"{wrong}: it cannot be called with one") from None


def check_number(
    name: str,
    value: object,
    *,
    least: int | None = None,
    above: int = 0,
    whole: bool = True,
    optional: bool = False,
    why: str = "",
) -> None:
    """`value` is an int (`whole`; a bool is no count) or a finite number, of at least
    `least` if given, else above `above`; or None if `optional`. `why` says what the
    bound is for."""
    if value is None and optional:
        return
    kind = "an int" if whole else "a number"
    or_none = " or None" if optional else ""
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
        raise TypeError(f"{name} must be {kind}{or_none}, not {type(value).__name__}")
    if least is not None:
        bound, out = f"of at least {least}", value < least
    else:
        bound, out = f"above {above}", value <= above
    if out or not math.isfinite(value):
        kind = kind if whole else "a finite number"
        why = f" ({why})" if why else ""
        raise ValueError(f"{name} must be {kind} {bound}{or_none}{why}, not {value!r}")


def check_flag(name: str, value: object) -> None:
    """A switch is True or False: "false" from an environment variable is truthy, and
    would turn on what it meant to turn off."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")


def check_routes(routes: Sequence[BaseRoute]) -> None:
    """The app's own routes: Starlette's (`Route`, `Mount`, `WebSocketRoute`)."""
    if isinstance(routes, BaseRoute):
        raise TypeError("routes is a list of routes, not one route")
    for index, route in enumerate(routes):
        if not isinstance(route, BaseRoute):
            raise TypeError(
                f"routes[{index}] must be a Starlette route (Route, Mount, WebSocketRoute), "
                f"not {type(route).__name__}"
            )


#: An origin as a browser sends it (RFC 6454): scheme, host and port, and nothing else.
ORIGIN = re.compile(r"(https?)://([a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?", re.IGNORECASE)


def check_origins(origins: Sequence[str], *, cors: bool) -> list[str]:
    """`scheme://host[:port]` each, as browsers send `Origin`; `*` only without `cors`
    credentials would make sense of it, so never."""
    if isinstance(origins, str):
        raise TypeError("allowed_origins is a list of origins, not one string")
    checked = [check_origin(index, origin) for index, origin in enumerate(origins)]
    if cors and not checked:
        raise ValueError("cors=True needs allowed_origins: the sites whose pages may call")
    return checked


def check_origin(index: int, origin: str) -> str:
    """The origin as a browser spells it in `Origin`, which is what it is compared with:
    scheme and host in lower case, no default port. Anything more (a path, a query) would
    match no browser's, and its page would be refused."""
    name = f"allowed_origins[{index}]"
    if not isinstance(origin, str):
        raise TypeError(f"{name} must be a string, not {type(origin).__name__}")
    match = ORIGIN.fullmatch(origin.removesuffix("/"))
    if match is None or not 0 < int(match[3] or 80) < 65536:
        raise ValueError(
            f"{name} must be scheme://host[:port] (http or https), as a browser's Origin "
            f"header says it, not {origin!r}{more_than_an_origin(origin)}"
        )
    scheme, host, port = match[1].lower(), match[2].lower(), match[3]
    if port is None or port.lstrip("0") == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{int(port)}"


def more_than_an_origin(url: str) -> str:
    """What a URL has that an origin has not, for the message: ": it has a path"."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if not parts.scheme or not parts.netloc:
        return ""  # not a URL at all
    extras = [
        what
        for what, there in (
            ("a user name", "@" in parts.netloc),
            ("a path", parts.path.strip("/")),
            ("a query", "?" in url),
            ("a fragment", "#" in url),
        )
        if there
    ]
    return f": it has {' and '.join(extras)}" if extras else ""


def check_hosts(
    allowed_hosts: Sequence[str] | None, origins: Sequence[str], identify: Identify
) -> HostCheck | None:
    """The host names to answer to, with the allowed origins' own; None (any) for an app
    that identifies its users and names none."""
    if isinstance(allowed_hosts, str):
        raise TypeError("allowed_hosts is a list of host names, not one string")
    if allowed_hosts is None and identify is not anonymous:
        return None
    for name in allowed_hosts or ():
        if not re.fullmatch(r"\*|(\*\.)?[A-Za-z0-9.-]+", name):
            raise ValueError(f"an allowed host is a name, *.name or *, not {name!r}")
    from_origins = [name_of(origin.split("://", 1)[1]) for origin in origins]
    return HostCheck([*(allowed_hosts or ()), *from_origins])
