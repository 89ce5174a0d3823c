"""The contract between the broker core and the API handlers: :class:`ApiHandler` tables.

Each module of :mod:`seglog.server.apis` named in :data:`API_MODULES` defines

- ``HANDLERS``: a tuple of :class:`ApiHandler`, one per Kafka API key it serves;
- optionally ``async def start(state)``: called once on the event loop after the store is
  open and before the listener accepts connections (create per-broker state in
  ``state.extensions[<module name>]``, start background tasks);
- optionally ``async def stop(state)``: called once on shutdown, after the listener closed
  and in-flight requests were answered, before the store closes.

The core answers ApiVersions itself from these tables (an API is advertised exactly when a
handler serves it, with its version range), decodes each request with kio's class for its key
and version (unless ``raw_request``), calls ``handle(ctx, request)`` and encodes what it
returns: a kio response entity of the request's version, a
:class:`~seglog.server.context.RawResponse` (the body already encoded, e.g. a Fetch
response whose record sets are zero-copy views of segment files), or None for no response at
all (Produce with acks=0). A handler answers every failure it can name with Kafka's error code
in its response; an exception escaping it is logged and closes that connection only.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Awaitable, Callable, NamedTuple, Union

from kio.static.protocol import ResponsePayload

from .context import RawResponse, RequestContext

__all__ = ["API_MODULES", "ApiHandler", "Handle", "Response", "api_name", "api_table_markdown",
           "load_handlers", "load_modules", "served_apis"]

#: What a handler returns: kio's response entity of the request's version, a
#: :class:`~seglog.server.context.RawResponse` (a body the handler encoded), or None (no
#: response at all: a Produce with acks=0).
Response = Union[ResponsePayload, RawResponse, None]
#: A handler, ``handle(ctx, request)``: ``request`` is kio's request entity of the key and
#: version (a ``memoryview`` of the body for a ``raw_request`` handler).
Handle = Callable[[RequestContext, Any], Awaitable[Response]]

#: The handler modules, in start order (stopped in reverse).
API_MODULES = (
    "seglog.server.apis.data",
    "seglog.server.apis.admin",
    "seglog.server.apis.group_configs",
    "seglog.server.apis.admin_describe_partitions",
    "seglog.server.apis.admin_features",
    "seglog.server.apis.groups",
    "seglog.server.apis.consumer_groups",
    "seglog.server.apis.streams_groups",
    "seglog.server.apis.share_groups",
    "seglog.server.apis.share_group_offsets",
    "seglog.server.apis.txn",
    "seglog.server.apis.share_state",
    "seglog.server.apis.sasl",
    "seglog.server.apis.security",
    "seglog.server.apis.tokens",
    "seglog.server.apis.client_quotas",
    "seglog.server.apis.acls",
    "seglog.server.apis.admin_cluster_ops",
    "seglog.server.apis.config_resources",
    "seglog.server.apis.log_dirs",
    "seglog.server.apis.share_fetch",
)


class ApiHandler(NamedTuple):
    """One Kafka API served: its ``api_key``, the inclusive version range
    ``min_version..max_version`` advertised in ApiVersions, and the coroutine function
    ``handle(ctx, request)``. With ``raw_request`` the handler gets the request body (the
    bytes after the request header) as a ``memoryview`` instead of a decoded kio entity."""

    api_key: int
    min_version: int
    max_version: int
    handle: Handle
    raw_request: bool = False


def load_modules() -> list[ModuleType]:
    """The modules of :data:`API_MODULES`, imported."""
    return [importlib.import_module(name) for name in API_MODULES]


def load_handlers(modules: list[ModuleType]) -> dict[int, ApiHandler]:
    """``{api_key: ApiHandler}`` over ``modules``; ValueError when two serve the same key or
    a version range is empty."""
    table: dict[int, ApiHandler] = {}
    for module in modules:
        for handler in module.HANDLERS:
            if handler.api_key in table:
                raise ValueError(f"API key {handler.api_key} served twice "
                                 f"(second time in {module.__name__})")
            if not 0 <= handler.min_version <= handler.max_version:
                raise ValueError(f"API key {handler.api_key}: empty version range "
                                 f"{handler.min_version}..{handler.max_version}")
            table[handler.api_key] = handler
    return table


#: ApiVersions: answered by the core itself (:mod:`seglog.server.protocol`), versions 0-5.
_CORE_APIS = ((18, 0, 5, "core"),)


def api_name(api_key: int) -> str:
    """Kafka's name of ``api_key`` (``3`` -> ``"Metadata"``), from :mod:`seglog.schemas`;
    ``"Unknown(<key>)"`` for a key it does not know."""
    from ..schemas import api_key_name  # kio's names and the keys kio does not know

    name = api_key_name(api_key)
    return f"Unknown({api_key})" if name is None else name


def served_apis(modules: list[ModuleType] | None = None) -> list[tuple[int, str, int, int, str]]:
    """``[(api_key, name, min_version, max_version, family), ...]`` sorted by key: every API
    the broker advertises in ApiVersions (the handler modules' tables and the core's
    ApiVersions); ``family`` is the handler module's last name (``data``, ``groups``, ...) or
    ``core``."""
    modules = load_modules() if modules is None else modules
    rows = [(key, api_name(key), low, high, family) for key, low, high, family in _CORE_APIS]
    for module in modules:
        family = module.__name__.rsplit(".", 1)[-1]
        for handler in module.HANDLERS:
            rows.append((handler.api_key, api_name(handler.api_key), handler.min_version,
                         handler.max_version, family))
    return sorted(rows)


def api_table_markdown(modules: list[ModuleType] | None = None) -> str:
    """The Markdown table of :func:`served_apis` that ``docs/server.md`` carries (a test
    keeps the two equal)."""
    lines = ["| Key | API | Versions | Served by |", "|---:|---|---|---|"]
    for key, name, low, high, family in served_apis(modules):
        versions = f"{low}" if low == high else f"{low}-{high}"
        lines.append(f"| {key} | {name} | {versions} | {family} |")
    return "\n".join(lines) + "\n"
