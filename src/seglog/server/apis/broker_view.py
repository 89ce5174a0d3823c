"""The broker as the shared handler modules see it: :class:`BrokerView`, the part of
:class:`~seglog.server.context.BrokerState` that :mod:`.data_topics` and :mod:`.admin_state`
use.

Why a protocol and not ``BrokerState`` itself: ``seglog.server.context`` imports
:mod:`.admin_state` (a lone broker's seam persists a created topic's overrides through it), so
:mod:`.admin_state` and what it imports may not import the context back (no import cycle, not
even under ``TYPE_CHECKING``: tests/test_layout.py). ``BrokerState`` matches this protocol
structurally; the handlers themselves take the ``RequestContext``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, TypeVar

if TYPE_CHECKING:
    from ...cluster.seam import PartitionSeam
    from ...store import Store

__all__ = ["BrokerView"]

#: What a call run by :meth:`BrokerView.run_blocking` returns.
_Result = TypeVar("_Result")


class BrokerView(Protocol):
    """One running broker: its ``store``, its effective ``config`` (Kafka's broker configs by
    name; the admin module replaces it when dynamic configs change), ``extensions`` (per-module
    state by module name) and ``cluster`` (the partition seam)."""

    store: Store
    config: Mapping[str, Any]
    extensions: dict[str, Any]
    cluster: PartitionSeam

    async def run_blocking(self, fn: Callable[..., _Result], *args: Any) -> _Result:
        """Run ``fn(*args)`` on a worker thread and return its result."""
        ...
