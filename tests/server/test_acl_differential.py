"""Differential: the same ACLs and the same requests against real Kafka 4.4 (with its
``StandardAuthorizer``) and against ``seglog serve`` (with its authorizer), and the same
answers back: an ACL matrix of what a principal may and may not do.

Principals. Until SASL is built in seglog, every client of a PLAINTEXT listener is
``User:ANONYMOUS``, so the matrix tells its two parties apart by host: the *admin* connects
from 127.0.0.2 and holds ALL on the cluster from that host only; the *subject* connects from
127.0.0.1 and holds what the matrix grants it. On both brokers that one bootstrap ACL exists
before anything else (Kafka: created by its super user ``User:admin`` over a SASL_PLAINTEXT
listener that only the broker side and this fixture use; seglog: written to its ACL file
before start); every other ACL is created by the admin with CreateAcls, the same requests to
both. Kafka's controller and inter-broker listeners are SASL_PLAINTEXT with ``User:admin`` (a
super user), so its own requests pass while no client is a super user.

The matrix: READ on one topic lets the subject fetch it but not produce to it nor read
another; a group it lacks READ on cannot be joined; a transactional id it lacks WRITE on cannot
be used; a LITERAL DENY beats a PREFIXED ALLOW; a host-bound ACL applies from that host only;
unauthorized topics are hidden from an all-topics Metadata and TOPIC_AUTHORIZATION_FAILED when
named; cluster operations are CLUSTER_AUTHORIZATION_FAILED; removing the DENY lets the write
through. Then the real client's view: confluent-kafka's producer gets
TOPIC_AUTHORIZATION_FAILED and its consumer GROUP_AUTHORIZATION_FAILED, on both brokers.

The second matrix names its users: alice, bob and the super user admin log in with SASL PLAIN
(Kafka's INTERNAL listener; a seglog broker with one SASL_PLAINTEXT listener), admin creates
the ACLs, and each user's produce, fetch, Metadata, JoinGroup and InitProducerId answers are
compared (a PREFIXED ALLOW for ``User:*`` with a LITERAL DENY for bob; the super user passes
where it holds no ACL), with confluent-kafka's error as bob.

The third runs both brokers with ``allow.everyone.if.no.acl.found=true``: topics and groups
without ACLs are open to ANONYMOUS, one with an ACL for bob is closed to it.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
import time
import uuid

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog._backend import get_backend
from seglog.bench.kafka import KafkaBroker, find_kafka, free_port
from seglog.security.acl import (CLUSTER_NAME, AclBinding, AclOperation as Op,
                                 AclPermissionType as Perm, PatternType as Pat,
                                 ResourceType as Res)
from seglog.security.acl_file import save_acls
from seglog.server.broker import Broker

from kafka_waits import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
WAIT_S = 30
ADMIN_HOST, SUBJECT_HOST = "127.0.0.2", "127.0.0.1"
ANON = "User:ANONYMOUS"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         'username="admin" password="admin-secret" user_admin="admin-secret" '
         'user_alice="alice-secret" user_bob="bob-secret";')
#: The one ACL each broker holds before the scenario: the admin's, bound to its host.
BOOTSTRAP_ACL = AclBinding(Res.CLUSTER, CLUSTER_NAME, Pat.LITERAL, ANON, ADMIN_HOST, Op.ALL,
                           Perm.ALLOW)
TIMEOUT = datetime.timedelta(seconds=10)
NOW_MS = int(time.time() * 1000)


def _need_kafka():
    if _REF is None:
        import os
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    _need_kafka()
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka-acl"))
    internal_port = free_port()
    kafka.properties_path.write_text(kafka.properties_path.read_text() + "\n".join((
        f"listeners=PLAINTEXT://127.0.0.1:{kafka.port},"
        f"CONTROLLER://127.0.0.1:{kafka.controller_port},INTERNAL://127.0.0.1:{internal_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{kafka.port},"
        f"CONTROLLER://127.0.0.1:{kafka.controller_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={_JAAS}",
        f"listener.name.internal.plain.sasl.jaas.config={_JAAS}",
        f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "super.users=User:admin",
    )) + "\n")
    kafka.format()
    kafka.start()
    try:
        _kafka_bootstrap_acl(f"127.0.0.1:{internal_port}")
        yield kafka.bootstrap, f"127.0.0.1:{internal_port}"
    finally:
        kafka.stop()


def _kafka_bootstrap_acl(sasl_bootstrap: str) -> None:
    """The admin's ACL, created by Kafka's super user over the SASL listener."""
    from confluent_kafka.admin import (AclBinding as CkBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)
    admin = AdminClient({"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    binding = CkBinding(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL, ANON,
                        ADMIN_HOST, AclOperation.ALL, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=WAIT_S)


@pytest.fixture(scope="module")
def seglog_broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("seglog-acl")
    save_acls(str(data_dir), [BOOTSTRAP_ACL])
    broker = Broker(data_dir, listen=("127.0.0.1", 0), config={
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0, "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin"})
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


class Wire:
    """One connection from ``source_host``, speaking Kafka's framing with kio's classes."""

    def __init__(self, bootstrap: str, source_host: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S,
                                             source_address=(source_host, 0))
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    @staticmethod
    def m(key, version):
        return sys.modules[load_request_schema(key, version).__module__]

    def call(self, key, version, **fields):
        cls = load_request_schema(key, version)
        self.correlation_id += 1
        head = struct.pack(">hhih", key, version, self.correlation_id, 3) + b"acl"
        if cls.__flexible__:
            head += b"\x00"
        body = io.BytesIO()
        entity_writer(cls)(body, cls(**fields))
        frame = head + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = self._recv(struct.unpack(">i", self._recv(4))[0])
        response_cls = load_response_schema(key, version)
        response, _ = entity_reader(response_cls)(
            memoryview(data), 4 + (1 if response_cls.__flexible__ else 0))
        return response

    def _recv(self, size_bytes):
        out = bytearray()
        while len(out) < size_bytes:
            chunk = self.sock.recv(size_bytes - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)


def _batch(values, **kwargs):
    return get_backend("native").encode_batch(list(values), None, [NOW_MS] * len(values), None,
                                              base_offset=0, **kwargs)


def _acl(name, op, perm=Perm.ALLOW, res=Res.TOPIC, pat=Pat.LITERAL, host="*"):
    return AclBinding(res, name, pat, ANON, host, op, perm)


#: The matrix's ACLs (all for User:ANONYMOUS; the subject connects from 127.0.0.1).
MATRIX_ACLS = (
    _acl("t-read", Op.READ),
    _acl("g-ok", Op.READ, res=Res.GROUP),
    _acl("tx-ok", Op.WRITE, res=Res.TRANSACTIONAL_ID),
    _acl("pre-", Op.WRITE, pat=Pat.PREFIXED),
    _acl("pre-denied", Op.WRITE, Perm.DENY),
    _acl("t-host", Op.WRITE, host=ADMIN_HOST),
    _acl("t-host", Op.READ, host=SUBJECT_HOST),
    _acl("t-conf", Op.ALTER_CONFIGS),
    _acl("g-conf", Op.ALTER_CONFIGS, res=Res.GROUP),
    _acl("sg-ok", Op.READ, res=Res.GROUP),
)
TOPICS = ("t-read", "t-other", "pre-allowed", "pre-denied", "t-host", "t-conf")


def _wait_for_topics(admin: Wire, names) -> None:
    m = admin.m(3, 12)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        r = admin.call(3, 12, topics=tuple(m.MetadataRequestTopic(topic_id=None, name=n)
                                           for n in names),
                       allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
        if all(int(t.error_code) == 0 and t.partitions for t in r.topics):
            return
        time.sleep(0.1)


def _wait_for_log_dirs(admin: Wire, names) -> None:
    """Wait (bounded) until the broker holds a partition of each of ``names`` in its log dir:
    DescribeLogDirs, which the admin's CLUSTER ACL allows (Metadata would answer
    TOPIC_AUTHORIZATION_FAILED, the admin having no ACL on the topics yet)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        r = admin.call(35, 4, topics=None)
        found = {t.name for d in r.results for t in d.topics if t.partitions}
        if int(r.error_code) == 0 and found.issuperset(names):
            return
        assert time.monotonic() < deadline, f"topics {sorted(set(names) - found)} never appeared"
        time.sleep(0.1)


def _acl_rows(wire: Wire) -> set:
    """Every ACL ``wire`` may describe, as :class:`AclBinding` values (empty on an error)."""
    r = wire.call(29, 3, resource_type_filter=int(Res.ANY), resource_name_filter=None,
                  pattern_type_filter=int(Pat.ANY), principal_filter=None, host_filter=None,
                  operation=int(Op.ANY), permission_type=int(Perm.ANY))
    return {AclBinding(Res(int(res.resource_type)), res.resource_name,
                       Pat(int(res.pattern_type)), a.principal, a.host, Op(int(a.operation)),
                       Perm(int(a.permission_type)))
            for res in r.resources for a in res.acls}


def _wait_for_acls(wire: Wire, present=(), absent=()) -> None:
    """Describe the ACLs again, bounded, until ``present`` all show and ``absent`` none:
    Kafka answers CreateAcls/DeleteAcls once its controller committed the records, and its
    broker's authorizer (which DescribeAcls reads and every check asks) applies them a moment
    later. Both brokers wait alike; the answers compared afterwards judge what they hold."""
    eventually(lambda: _acl_rows(wire),
               lambda rows: rows.issuperset(present) and not rows.intersection(absent))


def scenario(bootstrap: str) -> dict:
    """Every step of the matrix on one broker; returns ``{step: answer}`` to compare."""
    admin, subject = Wire(bootstrap, ADMIN_HOST), Wire(bootstrap, SUBJECT_HOST)
    out: dict = {}
    try:
        ct = admin.m(19, 7)
        r = admin.call(19, 7, topics=tuple(ct.CreatableTopic(
            name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
            for n in TOPICS), timeout=TIMEOUT, validate_only=False)
        out["admin creates topics"] = {t.name: int(t.error_code) for t in r.topics}
        _wait_for_log_dirs(admin, TOPICS)

        ca = admin.m(30, 3)

        def creations(bindings):
            return tuple(ca.AclCreation(
                resource_type=int(b.resource_type), resource_name=b.name,
                resource_pattern_type=int(b.pattern_type), principal=b.principal,
                host=b.host, operation=int(b.operation), permission_type=int(b.permission))
                for b in bindings)

        r = admin.call(30, 3, creations=creations(MATRIX_ACLS))
        out["admin creates ACLs"] = [(int(x.error_code), x.error_message) for x in r.results]
        bad = (_acl("x", Op.ALTER, res=Res.CLUSTER), _acl("", Op.READ), _acl("t", Op.READ))
        r = admin.call(30, 3, creations=creations(bad))
        out["invalid ACLs"] = [(int(x.error_code), x.error_message) for x in r.results]
        r = admin.call(30, 3, creations=creations((_acl("t", Op.READ, pat=Pat.MATCH),
                                                   _acl("t2", Op.READ))))
        out["a filter-only value in an ACL"] = [(int(x.error_code), x.error_message)
                                                for x in r.results]
        r = subject.call(30, 3, creations=creations(MATRIX_ACLS[:1]))
        out["subject creates ACLs"] = [int(x.error_code) for x in r.results]
        dl = admin.m(31, 3)
        r = admin.call(31, 3, filters=(dl.DeleteAclsFilter(
            resource_type_filter=int(Res.TOPIC), resource_name_filter="t",
            pattern_type_filter=int(Pat.LITERAL), principal_filter=None, host_filter=None,
            operation=int(Op.ANY), permission_type=int(Perm.ANY)),))
        out["admin deletes the ACL on t"] = [
            (int(f.error_code), f.error_message, [(int(a.error_code), a.error_message)
                                                  for a in f.matching_acls])
            for f in r.filter_results]
        _wait_for_acls(admin, present=MATRIX_ACLS, absent=(_acl("t", Op.READ),))
        out.update(_describe_acls(admin, subject))
        _settle_coordinators(subject)

        out.update(_data_path(subject))
        out.update(_groups_and_transactions(subject))
        out.update(_share_groups(subject))
        out.update(_admin_apis(subject))

        dl = admin.m(31, 3)
        r = admin.call(31, 3, filters=(dl.DeleteAclsFilter(
            resource_type_filter=int(Res.TOPIC), resource_name_filter="pre-denied",
            pattern_type_filter=int(Pat.LITERAL), principal_filter=None, host_filter=None,
            operation=int(Op.ANY), permission_type=int(Perm.DENY)),))
        out["admin deletes the DENY"] = [
            (int(f.error_code), [(a.resource_name, int(a.operation), int(a.permission_type))
                                 for a in f.matching_acls]) for f in r.filter_results]
        _wait_for_acls(admin, absent=(_acl("pre-denied", Op.WRITE, Perm.DENY),))
        out["produce after the DENY is gone"] = _produce(subject, "pre-denied")
    finally:
        admin.close()
        subject.close()
    out.update(_real_clients(bootstrap))
    return out


def _settle_coordinators(subject: Wire) -> None:
    """Wait (bounded) until the group and transaction coordinators and the producer id
    allocation answer (Kafka creates and loads its internal topics, and fetches producer id
    blocks from its controller, a moment after the first ask): what follows compares
    authorization, not start-up timing."""
    om = subject.m(9, 8)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        groups = subject.call(10, 4, key_type=0, coordinator_keys=("g-ok",)).coordinators
        txns = subject.call(10, 4, key_type=1, coordinator_keys=("tx-ok",)).coordinators
        fetched = subject.call(9, 8, groups=(om.OffsetFetchRequestGroup(
            group_id="g-ok", topics=None),), require_stable=False).groups
        idempotent = subject.call(22, 4, transactional_id=None,
                                  transaction_timeout=datetime.timedelta(seconds=60),
                                  producer_id=-1, producer_epoch=-1)
        if int(groups[0].error_code) == 0 and int(txns[0].error_code) == 0 and \
                int(fetched[0].error_code) == 0 and int(idempotent.error_code) == 0:
            return
        time.sleep(0.2)


def _describe_acls(admin: Wire, subject: Wire) -> dict:
    out = {}

    def describe(wire, **filters):
        base = dict(resource_type_filter=int(Res.ANY), resource_name_filter=None,
                    pattern_type_filter=int(Pat.ANY), principal_filter=None, host_filter=None,
                    operation=int(Op.ANY), permission_type=int(Perm.ANY))
        base.update(filters)
        r = wire.call(29, 3, **base)
        return int(r.error_code), sorted(
            (int(res.resource_type), res.resource_name, int(res.pattern_type), a.principal,
             a.host, int(a.operation), int(a.permission_type))
            for res in r.resources for a in res.acls)

    out["describe every ACL"] = describe(admin)
    out["describe ACLs matching pre-denied"] = describe(
        admin, resource_type_filter=int(Res.TOPIC), resource_name_filter="pre-denied",
        pattern_type_filter=int(Pat.MATCH))
    out["describe prefixed ACLs"] = describe(admin, pattern_type_filter=int(Pat.PREFIXED))
    out["subject describes ACLs"] = describe(subject)[0]
    return out


def _produce(subject: Wire, topic: str, transactional_id=None, **batch) -> int:
    pm = subject.m(0, 9)
    r = subject.call(0, 9, transactional_id=transactional_id, acks=-1, timeout=TIMEOUT,
                     topic_data=(pm.TopicProduceData(name=topic, partition_data=(
                         pm.PartitionProduceData(index=0, records=_batch([b"v"], **batch)),)),))
    return int(r.responses[0].partition_responses[0].error_code)


def _data_path(subject: Wire) -> dict:
    out: dict = {}
    mm = subject.m(3, 12)
    r = subject.call(3, 12, topics=None, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=True)
    out["metadata, all topics"] = sorted(
        (t.name, int(t.error_code), int(t.topic_authorized_operations)) for t in r.topics
        if not t.name.startswith("__"))
    r = subject.call(3, 12, topics=tuple(mm.MetadataRequestTopic(topic_id=None, name=n)
                                         for n in ("t-read", "t-other", "no-such-topic")),
                     allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    out["metadata, named"] = sorted((t.name, int(t.error_code), bool(t.partitions))
                                    for t in r.topics)
    out["produce"] = {t: _produce(subject, t) for t in TOPICS + ("no-such-topic",)}
    fm = subject.m(1, 12)
    r = subject.call(1, 12, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0),
                     min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                     session_epoch=-1, topics=tuple(fm.FetchTopic(topic=t, partitions=(
                         fm.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                           last_fetched_epoch=-1, log_start_offset=-1,
                                           partition_max_bytes=1 << 20),))
                         for t in ("t-read", "t-other", "t-host")),
                     forgotten_topics_data=(), rack_id="")
    out["fetch"] = {t.topic: int(t.partitions[0].error_code) for t in r.responses}
    r = subject.call(1, 12, cluster_id=None, replica_id=5, max_wait=datetime.timedelta(0),
                     min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                     session_epoch=-1, topics=(fm.FetchTopic(topic="t-read", partitions=(
                         fm.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                           last_fetched_epoch=-1, log_start_offset=-1,
                                           partition_max_bytes=1 << 20),)),),
                     forgotten_topics_data=(), rack_id="")
    out["follower fetch"] = [int(p.error_code) for t in r.responses for p in t.partitions]
    lm = subject.m(2, 7)
    r = subject.call(2, 7, replica_id=-1, isolation_level=0, topics=tuple(
        lm.ListOffsetsTopic(name=t, partitions=(lm.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),))
        for t in ("t-read", "t-other")))
    out["list offsets"] = {t.name: int(t.partitions[0].error_code) for t in r.topics}
    return out


def _groups_and_transactions(subject: Wire) -> dict:
    out: dict = {}
    r = subject.call(10, 4, key_type=0, coordinator_keys=("g-ok", "g-no"))
    out["find group coordinator"] = {c.key: int(c.error_code) for c in r.coordinators}
    r = subject.call(10, 4, key_type=1, coordinator_keys=("tx-ok", "tx-no"))
    out["find txn coordinator"] = {c.key: int(c.error_code) for c in r.coordinators}
    jm = subject.m(11, 9)
    out["join group"] = {}
    for group in ("g-ok", "g-no"):
        r = subject.call(11, 9, group_id=group, session_timeout=datetime.timedelta(seconds=10),
                         rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                         group_instance_id=None, protocol_type="consumer",
                         protocols=(jm.JoinGroupRequestProtocol(name="range", metadata=b""),),
                         reason=None)
        out["join group"][group] = int(r.error_code)
    r = subject.call(12, 4, group_id="g-no", generation_id=1, member_id="m",
                     group_instance_id=None)
    out["heartbeat, no READ"] = int(r.error_code)
    om = subject.m(8, 8)
    out["offset commit"] = {}
    for group in ("g-ok", "g-no"):
        r = subject.call(8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                         group_instance_id=None, topics=tuple(om.OffsetCommitRequestTopic(
                             name=t, partitions=(om.OffsetCommitRequestPartition(
                                 partition_index=0, committed_offset=0,
                                 committed_leader_epoch=-1, committed_metadata=""),))
                             for t in ("t-read", "t-other")))
        out["offset commit"][group] = {t.name: int(t.partitions[0].error_code)
                                       for t in r.topics}
    fm = subject.m(9, 8)
    r = subject.call(9, 8, groups=(
        fm.OffsetFetchRequestGroup(group_id="g-ok", topics=None),
        fm.OffsetFetchRequestGroup(group_id="g-ok", topics=(fm.OffsetFetchRequestTopics(
            name="t-other", partition_indexes=(0,)),)),
        fm.OffsetFetchRequestGroup(group_id="g-no", topics=None)), require_stable=False)
    out["offset fetch"] = [(g.group_id, int(g.error_code), sorted(
        (t.name, int(p.error_code), int(p.committed_offset)) for t in g.topics
        for p in t.partitions)) for g in r.groups]
    r = subject.call(16, 4, states_filter=())
    out["list groups"] = sorted(g.group_id for g in r.groups)
    r = subject.call(15, 5, groups=("g-ok", "g-no"), include_authorized_operations=True)
    out["describe groups"] = [(g.group_id, int(g.error_code), int(g.authorized_operations))
                              for g in r.groups]
    odm = subject.m(47, 0)
    r = subject.call(47, 0, group_id="g-ok", topics=(odm.OffsetDeleteRequestTopic(
        name="t-read", partitions=(odm.OffsetDeleteRequestPartition(partition_index=0),)),))
    out["offset delete, no group DELETE"] = int(r.error_code)
    pm = subject.m(61, 0)
    r = subject.call(61, 0, topics=tuple(pm.TopicRequest(name=t, partition_indexes=(0,))
                                         for t in ("t-read", "t-other")))
    out["describe producers"] = {t.name: int(t.partitions[0].error_code) for t in r.topics}
    r = subject.call(42, 2, groups_names=("g-ok",))
    out["delete groups"] = [int(x.error_code) for x in r.results]
    out["init producer id"] = {}
    for tx in ("tx-ok", "tx-no", None):
        r = subject.call(22, 4, transactional_id=tx,
                         transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                         producer_epoch=-1)
        out["init producer id"][str(tx)] = int(r.error_code)
    r = subject.call(22, 4, transactional_id="tx-ok",
                     transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                     producer_epoch=-1)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    am = subject.m(24, 3)
    out["add partitions to txn"] = {}
    for tx, topics in (("tx-ok", ("pre-allowed", "t-read")), ("tx-no", ("pre-allowed",))):
        r = subject.call(24, 3, v3_and_below_transactional_id=tx, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=tuple(
                             am.AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics))
        out["add partitions to txn"][tx] = {
            t.name: [int(p.partition_error_code) for p in t.results_by_partition]
            for t in r.results_by_topic_v3_and_below}
    r = subject.call(25, 3, transactional_id="tx-ok", producer_id=pid, producer_epoch=epoch,
                     group_id="g-no")
    out["add offsets to txn, no group READ"] = int(r.error_code)
    out["transactional produce, no txn WRITE"] = _produce(
        subject, "pre-allowed", transactional_id="tx-no", producer_id=pid, producer_epoch=epoch,
        base_sequence=0, is_transactional=True)
    r = subject.call(26, 3, transactional_id="tx-no", producer_id=pid, producer_epoch=epoch,
                     committed=False)
    out["end txn, no txn WRITE"] = int(r.error_code)
    # (DescribeTransactions is left out: Kafka answers a refused id with start time -1,
    # which kio cannot read back.)
    r = subject.call(66, 1, state_filters=(), producer_id_filters=(), duration_filter=-1)
    out["list transactions"] = sorted(t.transactional_id for t in r.transaction_states)
    return out


def _share_groups(subject: Wire) -> dict:
    """Share groups (KIP-932): READ on the group and DESCRIBE on the subscribed topics for
    ShareGroupHeartbeat, DESCRIBE for ShareGroupDescribe / DescribeShareGroupOffsets, READ
    (group and topics) for AlterShareGroupOffsets, DELETE on the group for
    DeleteShareGroupOffsets."""
    out: dict = {}
    member = "0" * 22
    for group, topics in (("sg-no", ("t-read",)), ("sg-ok", ("t-other",)),
                          ("sg-ok", ("t-read",))):
        r = subject.call(76, 1, group_id=group, member_id=member, member_epoch=0,
                         rack_id=None, subscribed_topic_names=topics)
        out[f"share heartbeat {group} {topics}"] = (int(r.error_code), r.error_message,
                                                    r.member_epoch)
    r = subject.call(77, 1, group_ids=("sg-ok", "sg-no"), include_authorized_operations=True)
    out["share group describe"] = [(g.group_id, int(g.error_code), g.group_state,
                                    int(g.authorized_operations)) for g in r.groups]
    dm = subject.m(90, 1)
    r = subject.call(90, 1, groups=(
        dm.DescribeShareGroupOffsetsRequestGroup(group_id="sg-ok", topics=(
            dm.DescribeShareGroupOffsetsRequestTopic(topic_name="t-read", partitions=(0,)),
            dm.DescribeShareGroupOffsetsRequestTopic(topic_name="t-other", partitions=(0,)))),
        dm.DescribeShareGroupOffsetsRequestGroup(group_id="sg-no", topics=None)))
    out["describe share group offsets"] = [
        (g.group_id, int(g.error_code), [(t.topic_name, [int(p.error_code) for p in t.partitions])
                                         for t in g.topics]) for g in r.groups]
    am = subject.m(91, 0)
    for group in ("sg-no", "sg-ok"):
        r = subject.call(91, 0, group_id=group, topics=tuple(am.AlterShareGroupOffsetsRequestTopic(
            topic_name=t, partitions=(am.AlterShareGroupOffsetsRequestPartition(
                partition_index=0, start_offset=0),)) for t in ("t-other",)))
        out[f"alter share group offsets {group}"] = (int(r.error_code), [
            (t.topic_name, [int(p.error_code) for p in t.partitions]) for t in r.responses])
    xm = subject.m(92, 0)
    r = subject.call(92, 0, group_id="sg-ok", topics=(
        xm.DeleteShareGroupOffsetsRequestTopic(topic_name="t-read"),))
    out["delete share group offsets, no group DELETE"] = int(r.error_code)
    return out


def _admin_apis(subject: Wire) -> dict:
    out: dict = {}
    ct = subject.m(19, 7)
    r = subject.call(19, 7, topics=(ct.CreatableTopic(
        name="s-new", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=TIMEOUT, validate_only=False)
    out["subject creates a topic"] = [(t.name, int(t.error_code), t.error_message)
                                      for t in r.topics]
    dt = subject.m(20, 6)
    r = subject.call(20, 6, topics=tuple(dt.DeleteTopicState(name=n, topic_id=None)
                                         for n in ("t-read", "t-other")), timeout=TIMEOUT)
    out["subject deletes topics"] = sorted((t.name, int(t.error_code)) for t in r.responses)
    cp = subject.m(37, 3)
    r = subject.call(37, 3, topics=(cp.CreatePartitionsTopic(name="t-read", count=2,
                                                             assignments=None),),
                     timeout=TIMEOUT, validate_only=True)
    out["subject grows a topic"] = [int(t.error_code) for t in r.results]
    dc = subject.m(32, 4)
    r = subject.call(32, 4, resources=tuple(dc.DescribeConfigsResource(
        resource_type=2, resource_name=n, configuration_keys=("cleanup.policy",))
        for n in ("t-read", "t-conf")) + (dc.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=("num.partitions",)),),
        include_synonyms=False, include_documentation=False)
    out["describe configs"] = [(x.resource_name, int(x.error_code)) for x in r.results]
    r = subject.call(35, 4, topics=None)
    out["describe log dirs"] = int(r.error_code)
    r = subject.call(74, 1, resource_types=())
    out["list config resources"] = int(r.error_code)
    arm = subject.m(34, 2)
    r = subject.call(34, 2, dirs=(arm.AlterReplicaLogDir(path="/no/such/dir", topics=(
        arm.AlterReplicaLogDirTopic(name="t-read", partitions=(0,)),)),))
    out["alter replica log dirs"] = [int(p.error_code) for t in r.results for p in t.partitions]
    r = subject.call(32, 4, resources=(dc.DescribeConfigsResource(
        resource_type=16, resource_name="cm", configuration_keys=None),),
        include_synonyms=False, include_documentation=False)
    out["describe client metrics"] = [int(x.error_code) for x in r.results]
    drm = subject.m(21, 2)
    r = subject.call(21, 2, topics=(drm.DeleteRecordsTopic(name="t-read", partitions=(
        drm.DeleteRecordsPartition(partition_index=0, offset=0),)),), timeout=TIMEOUT)
    out["delete records"] = [int(p.error_code) for t in r.topics for p in t.partitions]
    iam = subject.m(44, 1)
    r = subject.call(44, 1, resources=tuple(iam.AlterConfigsResource(
        resource_type=rtype, resource_name=name, configs=(iam.AlterableConfig(
            name=key, config_operation=0, value=value),))
        for rtype, name, key, value in ((2, "t-conf", "retention.ms", "100000"),
                                        (2, "t-read", "retention.ms", "100000"),
                                        (4, "", "log.cleaner.threads", "1"),
                                        (16, "cm", "interval.ms", "1000"))),
        validate_only=True)
    out["incremental alter configs"] = sorted((x.resource_name, int(x.error_code))
                                              for x in r.responses)
    # Group configs: ALTER_CONFIGS (which implies DESCRIBE_CONFIGS) on the GROUP.
    r = subject.call(44, 1, resources=tuple(iam.AlterConfigsResource(
        resource_type=32, resource_name=name, configs=(iam.AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest"),))
        for name in ("g-conf", "g-ok")), validate_only=False)
    out["incremental alter group configs"] = sorted(
        (x.resource_name, int(x.error_code), x.error_message) for x in r.responses)
    # Kafka answers the alter once its controller committed it; its broker's metadata image
    # catches up tens of ms later on a busy machine (CI saw 'latest' here). Describe again,
    # bounded, until g-conf shows the value: on both brokers alike.

    def describe_group_configs():
        r = subject.call(32, 4, resources=tuple(dc.DescribeConfigsResource(
            resource_type=32, resource_name=n, configuration_keys=("share.auto.offset.reset",))
            for n in ("g-ok", "g-conf")), include_synonyms=False, include_documentation=False)
        return [(x.resource_name, int(x.error_code), x.error_message,
                 [(c.name, c.value) for c in x.configs]) for x in r.results]

    out["describe group configs"] = eventually(
        describe_group_configs,
        lambda described: ("g-conf", 0, "", [("share.auto.offset.reset", "earliest")])
        in described)
    r = subject.call(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    out["describe cluster operations"] = int(r.cluster_authorized_operations)
    out.update(_share_state_apis(subject))
    return out


def _share_state_apis(subject: Wire) -> dict:
    """The share coordinator's APIs (83-87) and FindCoordinator for a share-partition key:
    CLUSTER_ACTION on the cluster, which the subject lacks."""
    out: dict = {}
    topic_id = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    r = subject.call(10, 6, key_type=2, coordinator_keys=("g:Dx4tPEtaaXiHlqW0w9Lh8A:0",))
    out["find share coordinator"] = [(int(c.error_code), c.error_message)
                                     for c in r.coordinators]
    for key, version, topics in (
            (83, 0, lambda m: (m.InitializeStateData(topic_id=topic_id, partitions=(
                m.PartitionData(partition=0, state_epoch=0, start_offset=0),)),)),
            (84, 0, lambda m: (m.ReadStateData(topic_id=topic_id, partitions=(
                m.PartitionData(partition=0, leader_epoch=0),)),)),
            (85, 1, lambda m: (m.WriteStateData(topic_id=topic_id, partitions=(
                m.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0,
                                delivery_complete_count=-1, state_batches=()),)),)),
            (86, 0, lambda m: (m.DeleteStateData(topic_id=topic_id, partitions=(
                m.PartitionData(partition=0),)),)),
            (87, 1, lambda m: (m.ReadStateSummaryData(topic_id=topic_id, partitions=(
                m.PartitionData(partition=0, leader_epoch=0),)),))):
        r = subject.call(key, version, group_id="g", topics=topics(subject.m(key, version)))
        out[f"share state api {key}"] = [(int(p.error_code), p.error_message)
                                         for t in r.results for p in t.partitions]
    return out


def _real_clients(bootstrap: str) -> dict:
    """confluent-kafka's view: the errors a producer and a consumer report."""
    from confluent_kafka import Consumer, KafkaError, Producer

    out: dict = {}
    delivered: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                         "enable.idempotence": False})
    producer.produce("t-read", b"x", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(WAIT_S)
    out["confluent producer to a READ-only topic"] = [
        None if e is None else e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        for e in delivered]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-no",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["t-read"])
        error = None
        deadline = time.monotonic() + WAIT_S
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error().code()
    except Exception as exc:  # noqa: BLE001 -- the client's error is what is compared
        error = getattr(exc.args[0], "code", lambda: repr(exc))() if exc.args else repr(exc)
    finally:
        consumer.close()
    out["confluent consumer in a group without READ"] = \
        error == KafkaError.GROUP_AUTHORIZATION_FAILED
    return out


def test_acl_matrix_answers_as_kafka_does(real_kafka, seglog_broker):
    expected = scenario(real_kafka[0])
    got = scenario(seglog_broker)
    different = {step: (expected[step], got.get(step)) for step in expected
                 if expected[step] != got.get(step)}
    assert not different, "\n".join(f"{step}:\n  kafka:  {k}\n  seglog: {s}"
                                    for step, (k, s) in different.items())
    # The matrix says what it means to (a few anchors, so that two equal wrongs cannot pass).
    assert got["produce"]["t-read"] == 29 and got["produce"]["pre-allowed"] == 0
    assert got["produce"]["pre-denied"] == 29 and got["produce after the DENY is gone"] == 0
    assert got["fetch"] == {"t-read": 0, "t-other": 29, "t-host": 0}
    assert got["join group"]["g-no"] == 30
    assert got["init producer id"]["tx-no"] == 53
    assert got["confluent producer to a READ-only topic"] == [True]
    assert got["confluent consumer in a group without READ"] is True
    assert got["share state api 84"] == [(31, "Cluster authorization failed.")]
    assert got["find share coordinator"][0][0] == 31


# --- named users over SASL_PLAINTEXT (PLAIN): alice, bob and the super user admin ----------


@pytest.fixture(scope="module")
def seglog_sasl_broker(tmp_path_factory):
    from sasl_helpers import sasl_properties

    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "inter.broker.listener.name": "SASL_PLAINTEXT",
              "sasl.mechanism.inter.broker.protocol": "PLAIN",
              **sasl_properties(mechanisms=("PLAIN",), plain_jaas=_JAAS),
              "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
              "group.initial.rebalance.delay.ms": 0,
              "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin"}
    broker = Broker(tmp_path_factory.mktemp("seglog-acl-sasl"), listen=("127.0.0.1", 0),
                    config=config)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def _user(bootstrap: str, name: str):
    from sasl_helpers import RawClient

    client = RawClient(bootstrap)
    assert client.login("PLAIN", name, f"{name}-secret")[-1].error_code == 0
    return client


def _named(name, op, perm=Perm.ALLOW, res=Res.TOPIC, pat=Pat.LITERAL, principal=None):
    return AclBinding(res, name, pat, principal, "*", op, perm)


#: alice may read and write her topic and read her group; everyone may read the "s-sh"
#: prefix, except bob, denied s-shared; nothing for bob.
SASL_ACLS = (
    _named("s-alice", Op.READ, principal="User:alice"),
    _named("s-alice", Op.WRITE, principal="User:alice"),
    _named("g-alice", Op.READ, res=Res.GROUP, principal="User:alice"),
    _named("s-sh", Op.READ, pat=Pat.PREFIXED, principal="User:*"),
    _named("s-shared", Op.READ, Perm.DENY, principal="User:bob"),
)
SASL_TOPICS = ("s-alice", "s-shared")


def sasl_scenario(bootstrap: str) -> dict:
    """The named-user matrix on one broker's SASL listener: ``{step: answer}``."""
    out: dict = {}
    admin, alice, bob = (_user(bootstrap, n) for n in ("admin", "alice", "bob"))
    try:
        ct = admin.m(19, 7)
        r = admin.call(19, 7, topics=tuple(ct.CreatableTopic(
            name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
            for n in SASL_TOPICS), timeout=TIMEOUT, validate_only=False)
        out["admin creates topics"] = {t.name: int(t.error_code) for t in r.topics}
        _wait_for_topics(admin, SASL_TOPICS)
        ca = admin.m(30, 3)
        r = admin.call(30, 3, creations=tuple(ca.AclCreation(
            resource_type=int(b.resource_type), resource_name=b.name,
            resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
            operation=int(b.operation), permission_type=int(b.permission)) for b in SASL_ACLS))
        out["admin creates ACLs"] = [int(x.error_code) for x in r.results]
        r = bob.call(29, 3, resource_type_filter=int(Res.ANY), resource_name_filter=None,
                     pattern_type_filter=int(Pat.ANY), principal_filter=None, host_filter=None,
                     operation=int(Op.ANY), permission_type=int(Perm.ANY))
        out["bob describes ACLs"] = int(r.error_code)
        _wait_for_acls(admin, present=SASL_ACLS)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:  # coordinators loaded (see _settle_coordinators)
            found = alice.call(10, 4, key_type=0, coordinator_keys=("g-alice",)).coordinators
            pid = alice.call(22, 4, transactional_id=None,
                             transaction_timeout=datetime.timedelta(seconds=60),
                             producer_id=-1, producer_epoch=-1)
            if int(found[0].error_code) == 0 and int(pid.error_code) == 0:
                break
            time.sleep(0.2)

        for who, client in (("admin", admin), ("alice", alice), ("bob", bob)):
            out[f"{who} produces"] = {t: _produce(client, t) for t in SASL_TOPICS}
            fm = client.m(1, 12)
            r = client.call(1, 12, cluster_id=None, replica_id=-1,
                            max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1,
                            topics=tuple(fm.FetchTopic(topic=t, partitions=(fm.FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=0,
                                last_fetched_epoch=-1, log_start_offset=-1,
                                partition_max_bytes=1 << 20),)) for t in SASL_TOPICS),
                            forgotten_topics_data=(), rack_id="")
            out[f"{who} fetches"] = {t.topic: int(t.partitions[0].error_code)
                                     for t in r.responses}
            r = client.call(3, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)
            # (The reference broker also holds the first matrix's topics.)
            out[f"{who} sees topics"] = sorted(t.name for t in r.topics
                                               if t.name in SASL_TOPICS)
            jm = client.m(11, 9)
            r = client.call(11, 9, group_id="g-alice",
                            session_timeout=datetime.timedelta(seconds=10),
                            rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                            group_instance_id=None, protocol_type="consumer",
                            protocols=(jm.JoinGroupRequestProtocol(name="range", metadata=b""),),
                            reason=None)
            out[f"{who} joins g-alice"] = int(r.error_code)
            r = client.call(22, 4, transactional_id=None,
                            transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                            producer_epoch=-1)
            out[f"{who} idempotent producer id"] = int(r.error_code)
    finally:
        for client in (admin, alice, bob):
            client.close()
    from confluent_kafka import KafkaError, Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "bob",
                         "sasl.password": "bob-secret", "message.timeout.ms": 10000,
                         "enable.idempotence": False})
    producer.produce("s-alice", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT_S)
    out["confluent producer as bob to s-alice"] = [
        None if e is None else e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors]
    return out


def test_acl_matrix_of_named_users_over_sasl_answers_as_kafka_does(real_kafka,
                                                                   seglog_sasl_broker):
    expected = sasl_scenario(real_kafka[1])
    got = sasl_scenario(seglog_sasl_broker)
    different = {step: (expected[step], got.get(step)) for step in expected
                 if expected[step] != got.get(step)}
    assert not different, "\n".join(f"{step}:\n  kafka:  {k}\n  seglog: {s}"
                                    for step, (k, s) in different.items())
    assert got["alice produces"] == {"s-alice": 0, "s-shared": 29}
    assert got["bob produces"] == {"s-alice": 29, "s-shared": 29}
    assert got["admin produces"] == {"s-alice": 0, "s-shared": 0}  # a super user
    assert got["alice fetches"] == {"s-alice": 0, "s-shared": 0}
    assert got["bob fetches"] == {"s-alice": 29, "s-shared": 29}  # DENY beats the prefix
    assert got["bob joins g-alice"] == 30 and got["bob idempotent producer id"] == 31
    assert got["confluent producer as bob to s-alice"] == [True]


# --- allow.everyone.if.no.acl.found=true ---------------------------------------------------

EVERYONE = {"authorizer.class.name": STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def real_kafka_everyone(tmp_path_factory):
    """A Kafka broker that lets everyone act on resources without ACLs (its own controller
    requests included: the cluster has no ACL until the scenario makes one)."""
    _need_kafka()
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka-acl-everyone"),
                        extra_properties=EVERYONE)
    kafka.format()
    kafka.start()
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def seglog_everyone(tmp_path_factory):
    broker = Broker(tmp_path_factory.mktemp("seglog-acl-everyone"), listen=("127.0.0.1", 0),
                    config={"offsets.topic.num.partitions": 1, **EVERYONE})
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def everyone_scenario(bootstrap: str) -> dict:
    """ANONYMOUS on a broker with ``allow.everyone.if.no.acl.found=true``."""
    out: dict = {}
    anon = Wire(bootstrap, SUBJECT_HOST)
    try:
        ct = anon.m(19, 7)

        def create(*names):
            r = anon.call(19, 7, topics=tuple(ct.CreatableTopic(
                name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
                for n in names), timeout=TIMEOUT, validate_only=False)
            return {t.name: int(t.error_code) for t in r.topics}

        out["create topics, no ACL anywhere"] = create("open", "bobs")
        _wait_for_topics(anon, ("open", "bobs"))
        ca = anon.m(30, 3)
        bob = AclBinding(Res.TOPIC, "bobs", Pat.LITERAL, "User:bob", "*", Op.ALL, Perm.ALLOW)
        r = anon.call(30, 3, creations=(ca.AclCreation(
            resource_type=int(bob.resource_type), resource_name=bob.name,
            resource_pattern_type=int(bob.pattern_type), principal=bob.principal,
            host=bob.host, operation=int(bob.operation), permission_type=int(bob.permission)),))
        out["create an ACL for bob, no cluster ACL"] = [int(x.error_code) for x in r.results]
        _wait_for_acls(anon, present=(bob,))
        out["produce"] = {t: _produce(anon, t) for t in ("open", "bobs")}
        r = anon.call(3, 12, topics=None, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
        out["metadata, all topics"] = sorted(t.name for t in r.topics
                                             if not t.name.startswith("__"))
        mm = anon.m(3, 12)
        r = anon.call(3, 12, topics=tuple(mm.MetadataRequestTopic(topic_id=None, name=n)
                                          for n in ("open", "bobs", "auto-x", "bad name!")),
                      allow_auto_topic_creation=True, include_topic_authorized_operations=True)
        out["metadata, named, with operations"] = sorted(
            (t.name, int(t.error_code), int(t.topic_authorized_operations)) for t in r.topics)
        # A group with an ACL for bob is closed to ANONYMOUS; one without any is open.
        # (Not the cluster: an ACL on it would close it to this Kafka's own PLAINTEXT
        # controller requests as well.)
        r = anon.call(30, 3, creations=(ca.AclCreation(
            resource_type=int(Res.GROUP), resource_name="g-bob",
            resource_pattern_type=int(Pat.LITERAL), principal="User:bob", host="*",
            operation=int(Op.READ), permission_type=int(Perm.ALLOW)),))
        out["create a group ACL for bob"] = [int(x.error_code) for x in r.results]
        _wait_for_acls(anon, present=(AclBinding(Res.GROUP, "g-bob", Pat.LITERAL, "User:bob",
                                                 "*", Op.READ, Perm.ALLOW),))
        jm = anon.m(11, 9)
        out["join group"] = {}
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:  # FindCoordinator makes Kafka's __consumer_offsets
            found = anon.call(10, 4, key_type=0, coordinator_keys=("g-open",)).coordinators
            if int(found[0].error_code) == 0:
                break
            time.sleep(0.2)
        for group in ("g-open", "g-bob"):
            deadline = time.monotonic() + WAIT_S
            while True:  # Kafka loads its new __consumer_offsets a moment after creating it
                r = anon.call(11, 9, group_id=group,
                              session_timeout=datetime.timedelta(seconds=10),
                              rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                              group_instance_id=None, protocol_type="consumer",
                              protocols=(jm.JoinGroupRequestProtocol(name="range",
                                                                     metadata=b""),),
                              reason=None)
                if int(r.error_code) not in (14, 15, 16) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            out["join group"][group] = int(r.error_code)
    finally:
        anon.close()
    return out


def test_allow_everyone_if_no_acl_found_answers_as_kafka_does(real_kafka_everyone,
                                                              seglog_everyone):
    expected = everyone_scenario(real_kafka_everyone)
    got = everyone_scenario(seglog_everyone)
    different = {step: (expected[step], got.get(step)) for step in expected
                 if expected[step] != got.get(step)}
    assert not different, "\n".join(f"{step}:\n  kafka:  {k}\n  seglog: {s}"
                                    for step, (k, s) in different.items())
    assert got["produce"] == {"open": 0, "bobs": 29}
    assert got["join group"] == {"g-open": 79, "g-bob": 30}
