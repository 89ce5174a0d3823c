"""``seglog groups`` on a data directory holding a streams group (KIP-1071) whose member was
still in when the broker stopped: the group's records are the ones seglog's streams group
coordinator writes to ``__consumer_offsets`` (made here by a heartbeat of the coordinator
itself, written with :meth:`seglog.Store.write_offsets_records`, as the broker writes them).
With no broker the member's session is over: the group is listed as a streams group, Empty,
described with its topology and committed offsets, and deleted with its records and internal
topics. Runs without Java (the end-to-end test with Kafka Streams itself is
test_groups_streams.py)."""

from __future__ import annotations

import seglog
from seglog.coordinator import streams_group as sg

GROUP = "app"
TOPOLOGY = sg.Topology(0, (
    sg.Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-repartition",)),
    sg.Subtopology("1", repartition_source_topics=(sg.TopicInfo("app-repartition"),),
                   state_changelog_topics=(sg.TopicInfo("app-changelog"),)),
))


def _make_data_dir(path) -> None:
    with seglog.Store(path) as store:
        for topic in ("words", "app-repartition", "app-changelog"):
            store.create_topic(topic, 2)
        producer = store.producer()
        for n in range(5):
            producer.send("words", b"w%d" % n, partition=n % 2)
        producer.flush()
        coordinator = sg.StreamsGroupCoordinator(
            sg.StreamsGroupConfig(), lambda t: store.topic(t).partitions
            if t in store.topics() else None, store.topics)
        joined = coordinator.heartbeat(
            group_id=GROUP, member_id="member-1", member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30_000, topology=TOPOLOGY,
            owned=({}, {}, {}), process_id="process-1", user_endpoint=None, client_tags=None,
            task_offsets=None, task_end_offsets=None, shutdown_application=False,
            client_id="app-client", client_host="/127.0.0.1", now_ms=0)
        assert joined.error_code == 0, joined
        assert coordinator.describe(GROUP).members, "the member is in"
        store.write_offsets_records(GROUP, list(coordinator.records(GROUP).items()))
        consumer = store.consumer(GROUP)
        consumer.commit({("words", 0): 1, ("words", 1): 2, ("app-repartition", 0): 0})
        consumer.close()


def test_streams_group_on_a_data_dir(run_seglog, tmp_path):
    path = tmp_path / "data"
    _make_data_dir(path)
    where = ["--data-dir", str(path)]
    listed = run_seglog("groups", "list", *where, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [(g["group"], g["type"], g["state"]) for g in listed.json()["groups"]] == [
        (GROUP, "streams", "Empty")]
    ran = run_seglog("groups", "describe", GROUP, *where, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    (d,) = ran.json()["groups"]
    assert (d["type"], d["state"], d["members"]) == ("streams", "Empty", [])
    assert [(s["subtopology_id"], s["source_topics"], s["repartition_source_topics"])
            for s in d["subtopologies"]] == [("0", ["words"], []),
                                             ("1", [], ["app-repartition"])]
    assert [(r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in d["offsets"]] == [("app-repartition", 0, 0, 0, 0),
                                       ("words", 0, 1, 3, 2), ("words", 1, 2, 2, 0)]
    text = run_seglog("groups", "describe", GROUP, *where)
    assert "TYPE streams" in text.stdout and "OFFSET-LAG" in text.stdout, text.stdout
    # --all-topics of a streams group: its input topics only
    reset = run_seglog("groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest",
                       "--execute", *where, "-o", "json")
    assert reset.returncode == 0, reset.stderr
    assert [(r["topic"], r["partition"], r["new_offset"]) for r in reset.json()["offsets"]] \
        == [("words", 0, 0), ("words", 1, 0)]
    gone = run_seglog("groups", "delete", GROUP, "--delete-all-internal-topics", *where,
                      "-o", "json")
    assert gone.returncode == 0, gone.stderr
    assert gone.json() == {"groups": [{"group": GROUP, "error": None, "internal_topics": [
        "app-changelog", "app-repartition"]}]}
    listed = run_seglog("groups", "list", *where, "-o", "json")
    assert listed.json() == {"groups": []}
    topics = run_seglog("topics", "list", *where, "-o", "json")
    assert topics.json()["topics"] == ["words"]
    with seglog.Store(path) as store:
        assert store.groups() == []
