"""The ``share`` bench part (issue 25) on tiny sizes: every queue drains every record with 1,
4 and 16 workers and the report has its figures. Rates are measured, not asserted."""

from __future__ import annotations

from seglog.bench import PART_ORDER, PART_TITLES, share
from seglog.bench.progress import Progress
from seglog.bench.runner import PART_MODULES, BenchContext, Config
from seglog.cli import build_parser


def _context(tmp_path) -> BenchContext:
    config = Config(mode="quick", only=("share",), progress=False, charts=False,
                    dir_path=str(tmp_path), records=300, runs=1)
    workdir = tmp_path / "work"
    workdir.mkdir()
    profile = type(config.profile)(**{**config.profile.__dict__, "runs": 1})
    return BenchContext(config, profile, workdir, Progress(enabled=False))


def test_share_is_a_registered_part():
    assert "share" in PART_ORDER and "share" in PART_TITLES
    assert PART_MODULES["share"] == "seglog.bench.share"
    args = build_parser().parse_args(["bench", "--quick", "--only", "share"])
    assert args.only == ("share",)


def test_tiny_share_run_drains_every_queue(tmp_path):
    result = share.run(_context(tmp_path))
    assert result.status == "ok", result.reason
    keys = [f"share_{w}" for w in share.WORKERS] + ["group_1"] + \
        [f"share_implicit_{w}" for w in share.WORKERS] + \
        [f"sqlite_{w}" for w in share.WORKERS]
    for key in keys:
        assert result.figures[key].median > 0, key
    persist = [f"persist_queue_{w}" for w in share.WORKERS]
    if all(key in result.figures for key in persist):
        assert all(result.figures[key].median > 0 for key in persist)
    else:  # persist-queue is a bench extra: without it the part says so
        assert any(note.startswith("persist_queue: not available") for note in result.notes)
    table = result.tables[0]
    assert table.columns == ["queue", "1 worker", "4 workers", "16 workers"]
    assert [row[0] for row in table.rows] == list(share.QUEUES.values())
    assert "share_16/sqlite" in result.figures
