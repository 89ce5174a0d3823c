"""``seglog-topics.json``: seglog's registry of a data directory's topics.

A Kafka broker keeps each topic's id, partition count and config overrides in its metadata log
(KRaft) or ZooKeeper, neither of which exists for an embedded store; seglog keeps them in this
one file of its own in the log dir (Kafka ignores files it does not know there), with the end
of the last block of producer ids handed out. Its format, version 0, indented JSON with sorted
keys and a final newline::

    {
     "producer_id_block_end": 1000,
     "topics": {
      "t": {
       "config": {"retention.ms": "1000000"},
       "partitions": 3,
       "topic_id": "<Kafka's base64url uuid>"
      }
     },
     "version": 0
    }

``config`` holds only the Kafka configs the topic sets over the broker's topic defaults. The
file is replaced atomically (write-temp, fsync, rename, fsync dir) and read with every field
checked; anything else is :class:`~seglog.errors.CorruptCheckpointError` naming the file and
the field. Topic names follow Kafka's rules (:func:`validate_topic_name`).

Plain functions over a directory path; the caller (:class:`~seglog.log_manager.LogManager`)
serialises writes under its metadata lock.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping

from . import filenames
from .errors import CorruptCheckpointError, InvalidConfigError, InvalidTopicError
from .storage import checkpoints
from .storage.config import LogConfig

__all__ = ["TOPICS_FILE", "TOPICS_FILE_VERSION", "TOPIC_NAME_LENGTH_MAX", "TOPIC_PARTITIONS_MAX",
           "overrides_of", "read_registry", "validate_topic_name", "write_registry"]

#: seglog's record of topic ids, partition counts and config overrides (see the module docstring).
TOPICS_FILE = filenames.TOPICS_FILE
TOPICS_FILE_VERSION = 0

#: Kafka's ``Topic.MAX_NAME_LENGTH``.
TOPIC_NAME_LENGTH_MAX = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
#: Most partitions one topic may have here (a limit on everything: each is a directory and
#: several open files).
TOPIC_PARTITIONS_MAX = 10000
_INT64_MAX = 2**63 - 1


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: raise :class:`InvalidTopicError` unless ``name`` is legal.

    Legal: 1 to 249 characters from ASCII letters, digits, ``.``, ``_`` and ``-``, and not
    ``.`` or ``..``.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than "
                                f"{TOPIC_NAME_LENGTH_MAX} characters, topic name: {name}")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(f"Topic name \"{name}\" is illegal, it contains a character "
                                "other than ASCII alphanumerics, '.', '_' and '-'")


def overrides_of(config: LogConfig, defaults: LogConfig) -> dict[str, str]:
    """The Kafka names and values where ``config`` differs from ``defaults`` (what a topic
    sets itself; the registry keeps only these)."""
    base = defaults.to_kafka()
    return {name: value for name, value in config.to_kafka().items() if base.get(name) != value}


def _registry_entry(path: str, name: Any, entry: Any) -> dict[str, Any]:
    """One topic of the registry at ``path``, checked: a valid topic name, ``partitions`` an
    int in [0, TOPIC_PARTITIONS_MAX], ``topic_id`` None or a Kafka uuid string, ``config`` a
    mapping of str to JSON scalars or lists that :meth:`LogConfig.from_kafka` accepts.
    Returns the entry with ``config`` parsed to a :class:`LogConfig` under ``"log_config"``.
    CorruptCheckpointError naming the file, the topic and the field otherwise."""
    def bad(why: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{path}: topic {name!r}: {why}", path=path)

    if not isinstance(name, str):
        raise bad("the topic name is not a string")
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise bad(str(e)) from None
    if not isinstance(entry, dict):
        raise bad(f"the entry must be an object, got {type(entry).__name__}")
    partitions = entry.get("partitions", 0)
    if isinstance(partitions, bool) or not isinstance(partitions, int) \
            or not 0 <= partitions <= TOPIC_PARTITIONS_MAX:
        raise bad(f"partitions must be an int in [0, {TOPIC_PARTITIONS_MAX}], got "
                  f"{partitions!r}")
    topic_id = entry.get("topic_id")
    if topic_id is not None:
        if not isinstance(topic_id, str):
            raise bad(f"topic_id must be a string, got {type(topic_id).__name__}")
        try:
            checkpoints.uuid_from_kafka_str(topic_id)
        except (ValueError, CorruptCheckpointError) as e:
            raise bad(f"topic_id {topic_id!r} is not a Kafka uuid: {e}") from None
    config = entry.get("config", {})
    if not isinstance(config, dict):
        raise bad(f"config must be an object, got {type(config).__name__}")
    try:
        log_config = LogConfig.from_kafka(config)
    except InvalidConfigError as e:
        raise bad(f"config: {e}") from None
    return {**entry, "partitions": partitions, "log_config": log_config}


def read_registry(dir_path: str) -> tuple[dict[str, dict[str, Any]], int]:
    """``({topic: entry}, producer_id_block_end)`` of the registry in ``dir_path`` (``({},
    0)`` when there is none), every field checked: CorruptCheckpointError naming the file and
    the field for anything else (wrong JSON types included), never a stray TypeError. Each
    entry has ``partitions``, ``topic_id`` (or None), ``config`` (the recorded Kafka configs)
    and ``log_config`` (those over Kafka's defaults, a :class:`LogConfig`)."""
    path = os.path.join(dir_path, TOPICS_FILE)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return {}, 0
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CorruptCheckpointError(f"{path} is not valid JSON: {e}", path=path) from None
    if not isinstance(data, dict) or data.get("version") != TOPICS_FILE_VERSION \
            or isinstance(data.get("version"), bool) \
            or not isinstance(data.get("topics"), dict):
        raise CorruptCheckpointError(f"{path}: unknown format", path=path)
    block_end = data.get("producer_id_block_end", 0)
    if isinstance(block_end, bool) or not isinstance(block_end, int) \
            or not 0 <= block_end <= _INT64_MAX:
        raise CorruptCheckpointError(
            f"{path}: producer_id_block_end must be an int in [0, {_INT64_MAX}], got "
            f"{block_end!r}", path=path)
    topics = {name: _registry_entry(path, name, entry)
              for name, entry in data["topics"].items()}
    return topics, block_end


def write_registry(dir_path: str, topics: Mapping[str, Mapping[str, Any]], *,
                   producer_id_block_end: int) -> None:
    """Replace the registry in ``dir_path`` atomically (the directory fsynced) with ``topics``
    (``{name: {"topic_id": ..., "partitions": ..., "config": {overrides}}}``) and
    ``producer_id_block_end``."""
    text = json.dumps({"version": TOPICS_FILE_VERSION, "topics": topics,
                       "producer_id_block_end": producer_id_block_end},
                      indent=1, sort_keys=True)
    checkpoints.atomic_write_bytes(os.path.join(dir_path, TOPICS_FILE),
                                   (text + "\n").encode("utf-8"))
