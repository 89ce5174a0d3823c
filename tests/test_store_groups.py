"""Store's membership records of classic groups (the wire broker's group coordinator):
written to ``__consumer_offsets``, read back after a reopen, ignored by the offsets loader."""

from __future__ import annotations

import pytest

from seglog import Store
from seglog.errors import InvalidGroupIdError, ReadOnlyError
from seglog.types import OffsetAndMetadata, TopicPartition


def test_group_metadata_records_survive_reopen_last_wins(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=3) as store:
        assert store.group_metadata_records() == {}
        store.create_topic("t", partitions=1)
        first = store.write_group_metadata("g1", b"one")
        store.write_group_metadata("g1", b"two")
        store.write_group_metadata("g2", b"x")
        store.write_group_metadata("g2", None)  # deleted
        store.offset_commit("g1", member_id=None, generation_id=-1,
                            offsets={TopicPartition("t", 0): OffsetAndMetadata(5)})
        assert first >= 0
        assert store.group_metadata_records() == {"g1": b"two", "g2": None}
    with Store(tmp_path, backend=backend) as store:
        assert store.group_metadata_records() == {"g1": b"two", "g2": None}
        # The offsets loader skipped the membership records and kept the commit.
        assert store.offset_fetch("g1", TopicPartition("t", 0)).offset == 5
    with Store(tmp_path, backend=backend, read_only=True) as store:
        assert store.group_metadata_records()["g1"] == b"two"
        with pytest.raises(ReadOnlyError):
            store.write_group_metadata("g1", b"three")


def test_write_group_metadata_refuses_empty_group_id(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        with pytest.raises(InvalidGroupIdError):
            store.write_group_metadata("", b"x")
