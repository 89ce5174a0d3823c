"""seglog: Apache Kafka's partition log as a Python library with a Cython core.

Segment files hold Kafka RecordBatch v2 batches with Kafka's indexes and names, so Kafka
tools and clients read them. ``seglog.get_backend("native" | "pure")`` gives the batch codec,
``Segment``, ``OffsetIndex`` and ``TimeIndex``; ``seglog.backend`` names the default backend.
"""

from __future__ import annotations

import importlib

from . import errors, format
from ._backend import BACKEND_NAMES, default_backend, get_backend
from .storage.config import LogConfig
from .storage.log import Log
from .store import Store, Topic, TopicPartition
from .clients.producer import Producer
from .clients.consumer import Consumer
from .clients.share_consumer import AcknowledgeType, ShareConsumer
from .coordinator.group import ConsumerGroup
from .types import ConsumerRecord

__version__ = "0.1.0"


def __getattr__(name: str):
    # ``seglog.backend`` is resolved lazily so that importing seglog never builds or loads
    # the extension by itself, and so SEGLOG_BACKEND is read when the name is first used.
    if name == "backend":
        return default_backend().name
    if name == "Broker":
        # The wire broker is imported on first use only: the storage layers never load the
        # server (tests/test_layout.py), and ``import seglog`` stays as light as it was.
        return importlib.import_module("seglog.server.broker").Broker
    raise AttributeError(f"module 'seglog' has no attribute {name!r}")


__all__ = ["AcknowledgeType", "BACKEND_NAMES", "Broker", "Consumer", "ConsumerGroup",
           "ConsumerRecord", "Log", "LogConfig", "Producer", "ShareConsumer", "Store", "Topic",
           "TopicPartition", "errors", "format", "get_backend", "default_backend", "__version__"]
