"""What the coordinators get from the store: the InternalTopics protocol, and nothing more."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import seglog
from seglog.coordinator.internal_topics import InternalTopics
from seglog.coordinator.offsets_schema import OFFSETS_TOPIC
from seglog.coordinator.txn_schema import TRANSACTION_STATE_TOPIC
from seglog.errors import InvalidTopicError, ReadOnlyError, UnknownTopicOrPartitionError
from seglog.store import Store
from seglog.types import TopicPartition

COORDINATOR_DIR = Path(seglog.__file__).parent / "coordinator"


def coordinator_view(store: Store) -> InternalTopics:
    """The view a store hands its coordinators (the one a group gets)."""
    group = store.group("g")
    return inspect.getattr_static(group, "_topics")


def test_the_store_view_has_every_protocol_member(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=2) as store:
        view = coordinator_view(store)
        for name in [n for n in vars(InternalTopics) if not n.startswith("_")] \
                + list(InternalTopics.__annotations__):
            assert hasattr(view, name), name
        assert not isinstance(view, Store)


def test_internal_topics_are_created_on_first_use(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=2,
               transaction_state_partitions=3) as store:
        view = coordinator_view(store)
        assert view.existing_topic(OFFSETS_TOPIC) is None
        assert view.internal_topic(OFFSETS_TOPIC).partitions == 2
        assert view.existing_topic(OFFSETS_TOPIC) is not None
        assert view.internal_topic(TRANSACTION_STATE_TOPIC).partitions == 3
        with pytest.raises(InvalidTopicError):
            view.internal_topic("t")
        store.create_topic("t", partitions=4)
        assert view.partition_counts()["t"] == 4
        assert view.partition_log(TopicPartition("t", 3)) is store.log(("t", 3))
        with pytest.raises(UnknownTopicOrPartitionError):
            view.partition_log(TopicPartition("t", 4))
        before = store.append_count
        view.notify_appended()
        assert store.append_count == before + 1


def test_a_read_only_view_refuses_writes(tmp_path, backend):
    Store(tmp_path, backend=backend).close()
    with Store(tmp_path, backend=backend, read_only=True) as store:
        view = coordinator_view(store)
        assert view.read_only
        with pytest.raises(ReadOnlyError):
            view.check_writable()


def test_coordinators_import_no_client_and_not_the_store():
    for path in sorted(COORDINATOR_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert "clients" not in name and name not in ("store", "seglog.store") \
                    and name != "broker_api", f"{path.name}:{node.lineno} imports {name}"
