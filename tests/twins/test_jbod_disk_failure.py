"""A log dir whose disk fails at runtime (a real full file system: a small tmpfs, as in
test_index_disk_full.py) goes offline with its partitions, the other dir serves on, and a
restart with the disk back recovers it; both backends, in a child process (as the other
full-disk tests)."""

from __future__ import annotations

import textwrap

from test_index_disk_full import FILL, _run_child, _small_fs

CHILD = FILL + textwrap.dedent("""
    import warnings
    from seglog import Store
    from seglog.errors import PartitionOfflineError

    good, small, backend_name = sys.argv[1], sys.argv[2], sys.argv[3]
    bad = os.path.join(small, "b")
    warnings.simplefilter("ignore", RuntimeWarning)
    out = {}
    store = Store(good, backend=backend_name, extra_log_dirs=[bad])
    store.create_topic("t", 2)
    out["placed"] = [os.path.basename(store.log_dir_of(("t", p))) for p in range(2)]
    healthy, failing = store.topic("t").log(0), store.topic("t").log(1)
    failing.append(b"acknowledged")
    failing.append_batch([b"x" * 10], producer_id=7, producer_epoch=0, base_sequence=0,
                         is_transactional=True)
    filler = fill(small)
    try:
        failing.append_txn_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                  commit=False)
        out["abort"] = None
    except Exception as exc:
        out["abort"] = outcome(exc)
    out["taken_offline"] = [os.path.basename(p) for p in store.check_log_dirs()]
    out["failures"] = [d.failure is not None for d in store.log_dirs()]
    out["offline"] = sorted(f"{tp.topic}-{tp.partition}" for tp in store.offline_partitions())
    try:
        store.topic("t").log(1)
        out["use_offline"] = None
    except PartitionOfflineError as exc:
        out["use_offline"] = exc.kafka_error_code
    out["healthy_append"] = store.topic("t").log(0).append(b"fine")
    store.create_topic("n", 1)
    out["new_placed"] = os.path.basename(store.log_dir_of(("n", 0)))
    store.close()
    os.remove(filler)
    store = Store(good, backend=backend_name, extra_log_dirs=[bad])
    out["reopened"] = {
        "offline": sorted(store.offline_partitions()),
        "bad": [r.value.decode() for r in
                store.topic("t").log(1).records(isolation="read_committed")],
        "good": [r.value.decode() for r in store.topic("t").log(0).records()],
        "append": store.topic("t").log(1).append(b"later")}
    store.close()
    print(json.dumps(out))
""")


def test_a_log_dir_failing_at_runtime_takes_only_its_partitions_offline(backend, tmp_path):
    with _small_fs(tmp_path) as small:
        out = _run_child(CHILD, str(tmp_path / "a"), small, backend.name)
    assert out["placed"] == ["a", "b"]
    assert out["abort"]["kafka_error_code"] == 56  # KAFKA_STORAGE_ERROR
    assert out["taken_offline"] == ["b"]
    assert out["failures"] == [False, True]
    assert out["offline"] == ["t-1"]
    assert out["use_offline"] == 56
    assert out["healthy_append"] == 0
    assert out["new_placed"] == "a"
    assert out["reopened"] == {"offline": [], "bad": ["acknowledged"], "good": ["fine"],
                               "append": 3}
