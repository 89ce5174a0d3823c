"""Mutated files of a partition log and of a store, after a clean close, an unclean copy and
a SIGKILL, opened (writer and read-only) on both backends in worker processes.

Log files: ``.log``, ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot``,
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``. Store files: the four
root checkpoints, ``meta.properties``, ``seglog-topics.json``, ``partition.metadata`` and the
``.log`` files of ``__consumer_offsets`` and ``__transaction_state``. Invariants: see
:mod:`fuzz.checks`.
"""

from __future__ import annotations

import pytest

from . import checks, corpus
from .campaign import FileCampaign, log_file_kinds


def _log_campaign(tmp_path, seed, seeds, count, workers, deadline_s=None):
    campaign = FileCampaign(out_dir=str(tmp_path), workers=workers)
    campaign.run(kind_name="log", seed=seed, count=count, seeds=seeds, handler="log",
                 kinds_of=log_file_kinds, check=checks.check_log,
                 comparable=checks.comparable_log, deadline_s=deadline_s)
    print(f"log file fuzz: seed {seed}, {campaign.cases} cases")
    assert not campaign.log, (f"log file fuzz (seed {seed}, {campaign.cases} cases; replay a "
                              f"case: PYTHONPATH=src:tests python3 -m fuzz.replay log {seed} "
                              f"<case>) found:\n{campaign.log.summary()}")
    return campaign.cases


def _store_campaign(tmp_path, seed, seeds, count, workers, deadline_s=None):
    campaign = FileCampaign(out_dir=str(tmp_path), workers=workers)
    campaign.run(kind_name="store", seed=seed, count=count, seeds=seeds, handler="store",
                 kinds_of=corpus.store_files, check=checks.check_store,
                 comparable=checks.comparable_store, deadline_s=deadline_s)
    print(f"store file fuzz: seed {seed}, {campaign.cases} cases")
    assert not campaign.log, (f"store file fuzz (seed {seed}, {campaign.cases} cases; replay a "
                              f"case: PYTHONPATH=src:tests python3 -m fuzz.replay store {seed} "
                              f"<case>) found:\n{campaign.log.summary()}")
    return campaign.cases


def test_seed_logs_cover_every_file_type(seed_logs):
    for label, (path, model) in seed_logs.items():
        kinds = log_file_kinds(path)
        assert {".log", ".index", ".timeindex", ".snapshot", "recovery-point-offset-checkpoint",
                "log-start-offset-checkpoint"} <= set(kinds), (label, kinds)
    assert any(".txnindex" in log_file_kinds(p) for p, _m in seed_logs.values())


def test_seed_stores_cover_every_file_type(seed_stores):
    for label, (path, model) in seed_stores.items():
        kinds = corpus.store_files(path)
        assert {"meta.properties", "seglog-topics.json", "partition.metadata",
                "__consumer_offsets", "__transaction_state"} <= set(kinds), (label, kinds)
    clean = corpus.store_files(seed_stores["clean"][0])
    assert {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
            "replication-offset-checkpoint"} <= set(clean), clean


@pytest.mark.fuzz
def test_log_files_short(tmp_path, fuzz_seed, seed_logs):
    _log_campaign(tmp_path, fuzz_seed, seed_logs, count=36, workers=1)


@pytest.mark.fuzz
def test_store_files_short(tmp_path, fuzz_seed, seed_stores):
    _store_campaign(tmp_path, fuzz_seed, seed_stores, count=14, workers=1)


@pytest.mark.fuzz_long
def test_log_files_long(tmp_path, fuzz_seed, seed_logs):
    _log_campaign(tmp_path, fuzz_seed + 7919, seed_logs, count=2500, workers=2)


@pytest.mark.fuzz_long
def test_store_files_long(tmp_path, fuzz_seed, seed_stores):
    _store_campaign(tmp_path, fuzz_seed + 7919, seed_stores, count=600, workers=2)
