"""A seglog cluster: several ``seglog serve`` brokers replicating through one ZooKeeper.

Kafka's ZooKeeper-era design (2.8), rebuilt: the znode layout and JSON of Kafka 2.8
(:mod:`seglog.cluster.zk_data`), a client for them with Kafka's fencing rules
(:mod:`seglog.cluster.zk_client`), a runner for Debian's ZooKeeper
(:mod:`seglog.cluster.zookeeper`), the controller and the replicas' state on top. The contract
between these modules and the manual is ``docs/cluster.md``.

This package sits between the storage/coordinator layers and the wire server: it never
imports ``seglog.server`` or ``seglog.clients`` (tests/test_layout.py checks it). This file
imports nothing, so ``import seglog.cluster.zk_data`` stays cheap and kazoo is loaded only by
the modules that talk to ZooKeeper.
"""
