"""Part ``cluster``: a 3-broker seglog cluster over ZooKeeper (being built, issue 12).

Until the measurements land the part reports itself unavailable in one line, so the rest of
``seglog bench`` runs unchanged.
"""

from __future__ import annotations

from .data import Unavailable
from .table import PartResult

NAME = "cluster"
TITLE = "a 3-broker seglog cluster (RF 3 vs RF 1, failover) beside a 3-broker Kafka"


def run(ctx) -> PartResult:
    """Not measured yet: unavailable."""
    raise Unavailable("the cluster part is being built (issue 12)")
