"""``seglog bench``: the user's benchmark suite, one module per part.

Parts, in the order they run (names for ``--only``):

* ``limits`` (:mod:`.limits`): this machine's ceilings: sequential write + fsync, page-cache
  read bandwidth, bare ``os.sendfile`` to loopback, CRC32C and lz4 throughput.
* ``article`` (:mod:`.article`): the seed article's sequential-vs-random file experiment,
  then taken apart (equal syscall counts; O_DIRECT).
* ``seglog`` (:mod:`.seglog_io`): the same question asked of a seglog Segment.
* ``twins`` (:mod:`.twins`): native core vs pure-Python twin, operation by operation.
* ``peers`` (:mod:`.peers`): seglog vs the logs Python users use today, same records and
  durability.
* ``sendfile`` (:mod:`.sendfile`): serving a segment to a loopback TCP reader.
* ``kafka`` (:mod:`.kafka`): a real Apache Kafka broker (java + the jars of
  ``ci/kafka-ref.sh``) measured with Kafka's ProducerPerformance / ConsumerPerformance.
* ``scale`` (:mod:`.scale`): thousands of partitions on one Store (create, write, close,
  reopen, read; time, RSS and descriptors per step), beside the real Kafka broker's
  ``TopicCommand`` where its jars are cached.
* ``clients`` (:mod:`.clients`): the embedded Producer and Consumer against the core
  under them and against confluent-kafka's produce() call rate and consume rate.
* ``broker`` (:mod:`.broker`): ``seglog serve`` against the real Kafka broker with the same
  clients (Kafka's perf tools, confluent-kafka): throughput, latency, start, RSS, idle CPU.
* ``cluster`` (:mod:`.cluster`): a 3-broker seglog cluster over ZooKeeper: acks=all produce
  throughput at RF 3 against RF 1, beside a real 3-broker Kafka (KRaft) cluster, and the
  failover time after kill -9 of a partition leader.
* ``share`` (:mod:`.share`): a work queue on one partition: records acknowledged per second
  by the embedded ShareConsumer with 1, 4 and 16 worker threads, beside a consumer group on
  the same data and persist-queue's and a hand-rolled sqlite3 queue.

The machinery: :mod:`.runner` (settings, scratch dir, running parts), :mod:`.stats`
(figures over runs, ratios, formatting), :mod:`.table` (results and tables),
:mod:`.progress` (stderr progress line), :mod:`.report` (results.json, results.md, charts),
:mod:`.data` (record values, backend loading).
"""

from __future__ import annotations

PART_ORDER = ("limits", "article", "seglog", "twins", "peers", "sendfile", "kafka", "scale",
              "broker", "clients", "cluster", "share")
PART_TITLES = {
    "limits": "this machine's limits (write ceiling, page-cache reads, sendfile, CRC32C, lz4)",
    "article": "the article's sequential vs random file I/O, taken apart",
    "seglog": "sequential vs random, asked of a seglog Segment",
    "twins": "native core vs pure-Python twin",
    "peers": "seglog vs Python logs users use today",
    "sendfile": "serving a segment to a loopback TCP reader",
    "kafka": "a real Apache Kafka broker with Kafka's own perf tools",
    "scale": "thousands of partitions on one Store, beside a real Kafka broker",
    "broker": "seglog serve vs the real Kafka broker, same clients, same machine",
    "clients": "the embedded Producer and Consumer against the core under them",
    "cluster": "a 3-broker seglog cluster (RF 3 vs RF 1, failover) beside a 3-broker Kafka",
    "share": "a work queue on one partition: share consumer vs consumer group vs sqlite queues",
}

__all__ = ["PART_ORDER", "PART_TITLES"]
