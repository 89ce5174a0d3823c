"""UpdateFeatures' rules (seglog.feature_updates.plan_updates) over a feature table passed by
argument (seglog's own builds no level yet), and the lone broker's durable store of finalized
features (seglog.cluster.features_store): written atomically, read back after a restart, its
epoch one more at every write and checked on each."""

from __future__ import annotations

import asyncio
import json

import pytest

from seglog import error_codes as codes
from seglog import feature_updates as fu
from seglog.cluster.features_store import (FEATURES_FILE_NAME, FeatureEpochMismatch,
                                           FileFeatureStore, read_feature_file)
from seglog.errors import CorruptCheckpointError
from seglog.features import Feature

#: A table of two built features (test-only: not seglog's).
TABLE = {
    "group.version": Feature("group.version", 0, 1, 1, "test"),
    "transaction.version": Feature("transaction.version", 0, 2, 0, "test"),
}
PREFIX = "Invalid update version {} for feature {}. "


def _plan(updates, finalized=None):
    return fu.plan_updates([fu.FeatureUpdate(*u) for u in updates], finalized or {}, TABLE, 7)


def test_upgrades_within_the_supported_range_are_finalized():
    outcome = _plan([("transaction.version", 2, fu.UPGRADE), ("group.version", 1, fu.UPGRADE)])
    assert outcome == (codes.NONE, None, {"transaction.version": 2, "group.version": 1})


def test_refusals_name_the_feature_and_leave_the_levels():
    finalized = {"transaction.version": 2}
    cases = [
        ([("transaction.version", 3, fu.UPGRADE)],
         PREFIX.format(3, "transaction.version") + "Local controller 7 only supports versions "
         "0-2"),
        ([("share.version", 1, fu.UPGRADE)],
         PREFIX.format(1, "share.version") + "Local controller 7 does not support this "
         "feature."),
        ([("group.version", -1, fu.UPGRADE)],
         PREFIX.format(-1, "group.version") + "A feature version cannot be less than 0."),
        ([("group.version", 1, fu.UNKNOWN)],
         PREFIX.format(1, "group.version") + "The controller does not support the given "
         "upgrade type."),
        ([("transaction.version", 1, fu.UPGRADE)],
         PREFIX.format(1, "transaction.version") + "Can't downgrade the version of this "
         "feature without setting the upgrade type to either safe or unsafe downgrade."),
        ([("group.version", 1, fu.SAFE_DOWNGRADE)],
         PREFIX.format(1, "group.version") + "Can't downgrade to a newer version."),
        ([("share.version", 0, fu.UPGRADE)],
         PREFIX.format(0, "share.version") + "Feature share.version not found."),
        # The first refusal fails the whole request, the valid update included.
        ([("group.version", 1, fu.UPGRADE), ("transaction.version", 9, fu.UPGRADE)],
         PREFIX.format(9, "transaction.version") + "Local controller 7 only supports "
         "versions 0-2"),
    ]
    for updates, message in cases:
        assert _plan(updates, finalized) == (codes.INVALID_UPDATE_VERSION, message,
                                             finalized), updates


def test_downgrades_need_a_downgrade_type_and_level_0_removes():
    finalized = {"transaction.version": 2, "group.version": 1}
    assert _plan([("transaction.version", 1, fu.SAFE_DOWNGRADE)], finalized).levels == \
        {"transaction.version": 1, "group.version": 1}
    assert _plan([("group.version", 0, fu.UNSAFE_DOWNGRADE)], finalized).levels == \
        {"transaction.version": 2}
    assert fu.upgrade_type_of_v0(True) == fu.SAFE_DOWNGRADE
    assert fu.upgrade_type_of_v0(False) == fu.UPGRADE


def test_feature_znode_is_kafka_2_8s_json():
    data = fu.encode_feature_znode({"transaction.version": 2, "group.version": 1,
                                    "gone": 0})
    assert json.loads(data) == {"version": 1, "status": 1, "features": {
        "group.version": {"min_version_level": 1, "max_version_level": 1},
        "transaction.version": {"min_version_level": 2, "max_version_level": 2}}}
    assert fu.decode_feature_znode(data) == {"transaction.version": 2, "group.version": 1}
    # Kafka 2.8's own node (a finalized range): its max level is the level.
    kafka = (b'{"features":{"feature_a":{"min_version_level":1,"max_version_level":3}},'
             b'"version":1,"status":1}')
    assert fu.decode_feature_znode(kafka) == {"feature_a": 3}
    assert fu.decode_feature_znode(b'{"version":1,"status":0,"features":{"a":'
                                   b'{"min_version_level":1,"max_version_level":1}}}') == {}
    for bad in (b"", b"[]", b'{"version":0,"status":1,"features":{}}',
                b'{"version":1,"status":5,"features":{}}', b'{"version":1,"status":1}',
                b'{"version":1,"status":1,"features":{"a":{"max_version_level":"x"}}}'):
        with pytest.raises(ValueError):
            fu.decode_feature_znode(bad)


def _run(coro):
    return asyncio.run(coro)


async def _blocking(fn, *args):
    return fn(*args)


def test_file_store_persists_levels_and_checks_the_epoch(tmp_path):
    store = FileFeatureStore(tmp_path, _blocking)
    assert _run(store.load()) is None and store.epoch is None
    outcome = _plan([("transaction.version", 2, fu.UPGRADE)])
    assert _run(store.write(outcome.levels, None)) == 0
    assert _run(store.write({"transaction.version": 2, "group.version": 1}, 0)) == 1
    with pytest.raises(FeatureEpochMismatch):
        _run(store.write({}, 0))  # a stale epoch changes nothing
    assert not (tmp_path / (FEATURES_FILE_NAME + ".tmp")).exists()
    # A restart reads it back.
    again = FileFeatureStore(tmp_path, _blocking)
    assert _run(again.load()) == (1, {"transaction.version": 2, "group.version": 1})
    assert again.epoch == 1
    assert _run(again.write({}, 1)) == 2
    assert read_feature_file(tmp_path) == (2, {})


def test_a_corrupt_file_is_refused(tmp_path):
    (tmp_path / FEATURES_FILE_NAME).write_bytes(b'{"version":1,"epoch":-4,"features":{}}')
    with pytest.raises(CorruptCheckpointError):
        read_feature_file(tmp_path)
    (tmp_path / FEATURES_FILE_NAME).write_bytes(b"\xff")
    with pytest.raises(CorruptCheckpointError):
        read_feature_file(tmp_path)
