"""The finalized features (KIP-584) a broker advertises, as one object the handlers reach
through ``BrokerState.extensions[FINALIZED_FEATURES_KEY]``: the server puts it there (its
:meth:`~seglog.server.broker.Server.set_finalized_features` behind it, which ApiVersions
answers from), the UpdateFeatures handler reads and changes it, and a ZooKeeper cluster's
``/feature`` watch changes it when another broker wrote."""

from __future__ import annotations

from typing import Callable

__all__ = ["FINALIZED_FEATURES_KEY", "FinalizedFeatures"]

#: The key of the :class:`FinalizedFeatures` in ``BrokerState.extensions``.
FINALIZED_FEATURES_KEY = "seglog.server.finalized_features"


class FinalizedFeatures:
    """``current()`` -> ``(epoch, levels)`` advertised now; ``publish(epoch, levels)``
    advertises a new set (a set older than the one advertised, by epoch, is ignored: a late
    notification of a write already taken)."""

    def __init__(self, current: Callable[[], tuple[int, dict[str, int]]],
                 publish: Callable[[int, dict[str, int]], None]):
        self._current = current
        self._publish = publish

    def current(self) -> tuple[int, dict[str, int]]:
        """``(epoch, levels)`` advertised now."""
        epoch, levels = self._current()
        return epoch, dict(levels)

    def publish(self, epoch: int, levels: dict[str, int]) -> None:
        """Advertise ``levels`` at ``epoch`` unless an epoch above it is advertised."""
        if epoch >= self._current()[0]:
            self._publish(epoch, dict(levels))
