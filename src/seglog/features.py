"""Kafka's feature flags (KIP-584) that seglog implements, with the levels it supports.

A broker advertises, in ApiVersions v3+, the features it *supports* (a version range per
feature) and the cluster's *finalized* level of each (what every broker has agreed to use);
clients choose protocols by the finalized levels: the Java producer uses transactions v2
(KIP-890) only when ``transaction.version`` is finalized at 2 or more. A feature appears here
only at the levels whose behaviour is built: a level that were advertised without its
behaviour would make clients speak a protocol the broker does not keep.

This module is a leaf: the table and pure functions over it. Where finalized levels are kept
(a lone broker's data dir, ZooKeeper's ``/feature`` znode) and how UpdateFeatures changes
them is the cluster layer's business.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

__all__ = ["FEATURES", "Feature", "default_finalized_levels", "finalized_ranges",
           "supported_ranges"]


class Feature(NamedTuple):
    """One feature: its Kafka ``name``, the inclusive level range seglog supports
    (``min_level..max_level``; level 0 means "off"), the level a new cluster finalizes
    (``default_level``, Kafka 4.4's default for a new cluster where seglog builds it) and
    what each level turns on (``doc``)."""

    name: str
    min_level: int
    max_level: int
    default_level: int
    doc: str


#: The features seglog supports, by name. A feature whose ``max_level`` is 0 is not built yet
#: and is not advertised.
FEATURES: dict[str, Feature] = {
    feature.name: feature for feature in (
        Feature("group.version", 0, 1, 1,
                "1: the consumer group protocol (KIP-848: ConsumerGroupHeartbeat)."),
        Feature("transaction.version", 0, 2, 2,
                "1: flexible transaction state records; 2: transactions v2 (KIP-890 part 2: "
                "an epoch bump at every commit or abort, server-side verification)."),
        Feature("streams.version", 0, 1, 1,
                "1: the streams group protocol (KIP-1071: StreamsGroupHeartbeat)."),
        Feature("share.version", 0, 2, 2,
                "1: share groups (KIP-932: ShareGroupHeartbeat, ShareFetch); 2: share "
                "groups' later additions of Kafka 4.2+ (renewed acknowledgements)."),
    )
}


def supported_ranges() -> dict[str, tuple[int, int]]:
    """``{name: (min_level, max_level)}`` of every built feature (``max_level`` >= 1), as
    ApiVersions' SupportedFeatures lists them."""
    return {f.name: (f.min_level, f.max_level) for f in FEATURES.values() if f.max_level >= 1}


def default_finalized_levels() -> dict[str, int]:
    """``{name: level}`` a new cluster finalizes: every built feature's ``default_level``
    above 0 (a feature at level 0 is not listed, as Kafka omits it)."""
    return {f.name: f.default_level for f in FEATURES.values() if f.default_level >= 1}


def finalized_ranges(levels: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """``{name: (min_version_level, max_version_level)}`` of ApiVersions' FinalizedFeatures
    for finalized ``levels``: Kafka 4.x reports ``(level, level)``."""
    return {name: (level, level) for name, level in levels.items() if level >= 1}
