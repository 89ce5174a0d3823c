"""``seglog.cluster.zk_data``: Kafka 2.8's znode paths and JSON, byte for byte.

The expected strings are what Kafka 2.8's encoders (``kafka/zk/ZkData.scala``,
``ProducerIdManager.generateProducerIdBlockJson``) produce: each was printed by the JVM running
the same construction Kafka's code makes (the Scala 2.13 ``scala-library``, Jackson's
``ObjectMapper``, Java 17), and the broker/topic/state/controller ones also match znodes dumped
from real Kafka 2.8 clusters (``zookeeper-shell get``). Decoders are checked on Kafka-written
bytes of other versions and key orders, and on bad bytes (a typed error, never a crash).
"""

from __future__ import annotations

import uuid

import pytest

from seglog.cluster import zk_data
from seglog.cluster.zk_data import (
    BrokerInfo,
    BrokerRegistration,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)
from seglog.types import TopicPartition

TOPIC_ID = uuid.UUID(bytes=bytes(16))  # "AAAAAAAAAAAAAAAAAAAAAA"


# ------------------------------------------------------------------------------ paths


def test_paths_are_kafkas():
    tp = TopicPartition("demo", 3)
    assert zk_data.broker_path(1) == "/brokers/ids/1"
    assert zk_data.topic_path("demo") == "/brokers/topics/demo"
    assert zk_data.topic_partitions_path("demo") == "/brokers/topics/demo/partitions"
    assert zk_data.topic_partition_path(tp) == "/brokers/topics/demo/partitions/3"
    assert zk_data.partition_state_path(tp) == "/brokers/topics/demo/partitions/3/state"
    assert zk_data.topic_config_path("demo") == "/config/topics/demo"
    assert zk_data.delete_topic_path("demo") == "/admin/delete_topics/demo"
    assert zk_data.sequence_number("config_change_0000000012", "config_change_") == "0000000012"


def test_persistent_paths_are_zkdata_persistent_zk_paths_in_order():
    # ZkData.PersistentZkPaths, with ConfigType.all = topics, clients, users, brokers, ips.
    assert zk_data.PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips")


# ----------------------------------------------------------------- encoders: exact bytes


def test_controller_json():
    assert zk_data.encode_controller(1, 1696000000123) == (
        b'{"version":1,"brokerid":1,"timestamp":"1696000000123"}')
    assert zk_data.decode_controller(b'{"version":1,"brokerid":7,"timestamp":"1"}') == 7


def test_controller_epoch_is_a_bare_integer():
    assert zk_data.encode_controller_epoch(5) == b"5"
    assert zk_data.decode_controller_epoch(b"0") == zk_data.INITIAL_CONTROLLER_EPOCH == 0
    assert zk_data.decode_controller_epoch(b"2147483647") == 2 ** 31 - 1


def test_partition_state_json_in_the_champ_order():
    state = PartitionState(leader=2, leader_epoch=13, isr=(2, 3), controller_epoch=7,
                           zk_version=4)
    data = zk_data.encode_partition_state(state)
    assert data == b'{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":13,"isr":[2,3]}'
    assert zk_data.decode_partition_state(data, zk_version=4) == state
    # Dumped from a Kafka 2.8 cluster (a partition with no leader has leader -1).
    assert zk_data.decode_partition_state(
        b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[2,3,1]}',
        zk_version=0) == PartitionState(-1, 0, (2, 3, 1), 1, 0)


def test_broker_registration_v5_as_kafka_2_8_writes_it():
    registration = BrokerRegistration(broker_id=1, host="127.0.0.11", port=9092)
    assert zk_data.encode_broker(registration, timestamp_ms=1696000000123) == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.11:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"127.0.0.11","version":5,"timestamp":"1696000000123"}')
    with_rack = BrokerRegistration(broker_id=1, host="127.0.0.11", port=9092, rack="r1")
    assert zk_data.encode_broker(with_rack, timestamp_ms=1696000000123) == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.11:9092"],"rack":"r1","jmx_port":-1,"port":9092,'
        b'"host":"127.0.0.11","version":5,"timestamp":"1696000000123"}')


def test_broker_registration_round_trip_and_kafka_samples():
    reg = BrokerRegistration(broker_id=3, host="127.0.0.13", port=9093, rack="r2")
    assert zk_data.decode_broker(3, zk_data.encode_broker(reg, timestamp_ms=1), epoch=77) == (
        BrokerInfo(broker_id=3, host="127.0.0.13", port=9093, rack="r2", epoch=77,
                   endpoints=(("PLAINTEXT", "127.0.0.13", 9093),)))
    # Version 4 as a Kafka 2.x broker with IBP < 2.7 wrote it (dumped from a cluster).
    v4 = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
          b'["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost",'
          b'"version":4,"timestamp":"1620904358029"}')
    assert zk_data.decode_broker(0, v4) == BrokerInfo(0, "localhost", 9092, None, -1,
                                                      (("PLAINTEXT", "localhost", 9092),))
    # Several listeners: the PLAINTEXT one is ours; version 1 has only host and port.
    multi = (b'{"features":{},"listener_security_protocol_map":{"BROKER":"PLAINTEXT",'
             b'"PLAINTEXT":"PLAINTEXT"},"endpoints":["BROKER://broker2:9092",'
             b'"PLAINTEXT://localhost:29092"],"jmx_port":-1,"port":9092,"host":"broker2",'
             b'"version":5,"timestamp":"1673441159443"}')
    assert zk_data.decode_broker(2, multi).port == 29092
    assert zk_data.decode_broker(2, multi).address("BROKER") == ("broker2", 9092)
    assert zk_data.decode_broker(2, multi).address("SSL") is None
    assert zk_data.decode_broker(5, b'{"version":1,"host":"h","port":1,"jmx_port":-1}').host == "h"
    ipv6 = BrokerRegistration(broker_id=4, host="::1", port=9092)
    data = zk_data.encode_broker(ipv6, timestamp_ms=1)
    assert b'"PLAINTEXT://[::1]:9092"' in data
    assert zk_data.decode_broker(4, data).host == "::1"
    # Every endpoint with its protocol (Kafka's BrokerIdZNode.encode): the top-level host
    # and port are the PLAINTEXT endpoint's, null and -1 without one.
    tls_only = BrokerRegistration(broker_id=6, host="h", port=9093, endpoints=(
        ("SSL", "SSL", "h", 9093), ("INTERNAL", "SSL", "10.0.0.6", 9094)))
    data = zk_data.encode_broker(tls_only, timestamp_ms=1)
    assert data == (b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL",'
                    b'"INTERNAL":"SSL"},"endpoints":["SSL://h:9093","INTERNAL://10.0.0.6:9094"],'
                    b'"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1"}')
    info = zk_data.decode_broker(6, data, listener="INTERNAL")
    assert (info.host, info.port, info.address("SSL")) == ("10.0.0.6", 9094, ("h", 9093))


def test_topic_assignment_v3_json():
    assignment = TopicAssignment(topic="demo", topic_id=TOPIC_ID,
                                 partitions={0: [1, 2, 3], 1: [2, 3, 1]})
    assert zk_data.encode_topic(assignment) == (
        b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    no_id = TopicAssignment(topic="demo", topic_id=None, partitions={0: [1, 2, 3], 1: [2, 3, 1]})
    assert zk_data.encode_topic(no_id) == (
        b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{},'
        b'"version":3}')


def test_topic_assignment_partition_order_is_scala_mutable_hashmaps():
    # Printed by the JVM: keys "0".."n-1" put into an empty scala.collection.mutable.Map.
    twelve = {p: [1] for p in range(12)}
    data = zk_data.encode_topic(TopicAssignment("t", None, twelve))
    assert data.startswith(b'{"partitions":{"11":[1],"0":[1],"1":[1],') and b'"10":[1]}' in data
    thirty = list(map(int, ("22,23,24,25,26,27,28,29,10,11,12,13,14,15,16,17,18,19,0,1,2,3,4,5,6,"
                            "7,8,9,20,21").split(",")))
    assert zk_data.scala_mutable_hashmap_order([str(p) for p in range(30)]) == list(map(str, thirty))
    hundred = zk_data.scala_mutable_hashmap_order([str(p) for p in range(100)])
    assert hundred[:14] == "88 89 90 91 92 93 94 95 96 97 10 98 11 99".split()


def test_topic_assignment_round_trip_and_older_versions():
    assignment = TopicAssignment(topic="demo", topic_id=uuid.uuid4(),
                                 partitions={p: [p % 3, (p + 1) % 3] for p in range(40)})
    assert zk_data.decode_topic("demo", zk_data.encode_topic(assignment)) == assignment
    # Version 2 as a Scala 2.12 build wrote it (another key order; no topic id).
    v2 = (b'{"version":2,"partitions":{"2":[3,2],"1":[2,1],"0":[1,3],"3":[1,2]},'
          b'"adding_replicas":{},"removing_replicas":{}}')
    decoded = zk_data.decode_topic("t", v2)
    assert decoded.topic_id is None
    assert decoded.partitions == {0: [1, 3], 1: [2, 1], 2: [3, 2], 3: [1, 2]}
    assert list(decoded.partitions) == [0, 1, 2, 3]
    assert zk_data.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}').partitions == {0: [1]}
    assert zk_data.decode_topic("t", b'{"version":1}').partitions == {}
    real = zk_data.decode_topic("demo", (
        b'{"partitions":{"0":[2,3,1],"1":[3,1,2],"2":[1,2,3]},"topic_id":"cMr3GpVESX2L3byPGf93lQ",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'))
    assert zk_data.uuid_to_string(real.topic_id) == "cMr3GpVESX2L3byPGf93lQ"


def test_topic_config_json_and_properties_order():
    assert zk_data.encode_entity_config({"min.insync.replicas": "2"}) == (
        b'{"version":1,"config":{"min.insync.replicas":"2"}}')
    # Printed by the JVM: a java.util.Properties filled in this order (Java 17).
    config = {"min.insync.replicas": "v", "unclean.leader.election.enable": "v",
              "retention.ms": "v", "cleanup.policy": "v"}
    assert zk_data.encode_entity_config(config) == (
        b'{"version":1,"config":{"cleanup.policy":"v","min.insync.replicas":"v",'
        b'"retention.ms":"v","unclean.leader.election.enable":"v"}}')
    sixteen = ("cleanup.policy compression.type delete.retention.ms file.delete.delay.ms "
               "flush.messages flush.ms index.interval.bytes max.message.bytes "
               "min.cleanable.dirty.ratio min.insync.replicas preallocate retention.bytes "
               "retention.ms segment.bytes segment.ms unclean.leader.election.enable").split()
    assert zk_data.java_properties_order(sixteen) == (  # past one resize of the table
        "compression.type file.delete.delay.ms max.message.bytes min.insync.replicas "
        "preallocate index.interval.bytes min.cleanable.dirty.ratio "
        "unclean.leader.election.enable delete.retention.ms retention.bytes cleanup.policy "
        "flush.ms retention.ms segment.bytes segment.ms flush.messages").split()
    assert zk_data.decode_entity_config(zk_data.encode_entity_config(config)) == config
    assert zk_data.decode_entity_config(None) == {}
    assert zk_data.decode_entity_config(b'{"version":1}') == {}


def test_small_jsons():
    assert zk_data.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert zk_data.decode_config_change(b'{"version":2,"entity_path":"topics/t"}') == "topics/t"
    assert zk_data.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert zk_data.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert len(zk_data.new_cluster_id()) == 22
    assert zk_data.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert zk_data.decode_log_dir_event(b'{"version":1,"broker":3,"event":1}') == 3
    tps = [TopicPartition("t", 0), TopicPartition("u", 2)]
    assert zk_data.encode_isr_change(tps) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":2}]}')
    assert zk_data.decode_isr_change(zk_data.encode_isr_change(tps)) == tps
    assert zk_data.decode_preferred_replica_election(
        zk_data.encode_preferred_replica_election(tps)) == tps
    reassign = {TopicPartition("t", 0): [1, 2, 3]}
    assert zk_data.encode_reassign_partitions(reassign) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}')
    assert zk_data.decode_reassign_partitions(zk_data.encode_reassign_partitions(reassign)) == reassign


def test_producer_id_block_json_and_next_block():
    block = ProducerIdBlock(broker_id=2, start=1000, end=1999)
    assert zk_data.encode_producer_id_block(block) == (
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}')
    assert zk_data.decode_producer_id_block(zk_data.encode_producer_id_block(block)) == block
    assert zk_data.next_producer_id_block(None, 5) == ProducerIdBlock(5, 0, 999)
    assert zk_data.next_producer_id_block(block, 5) == ProducerIdBlock(5, 2000, 2999)
    with pytest.raises(ZkDataError, match="exhausted"):
        zk_data.next_producer_id_block(ProducerIdBlock(1, 0, 2 ** 63 - 1000), 1)


def test_strings_are_escaped_as_jackson_escapes_them():
    # Printed by Jackson's writeValueAsBytes: short escapes, other controls as upper-case
    # \u00XX, a character outside the BMP as its surrogate pair, the rest raw UTF-8.
    text = 'q"b\\s/\b\t\n\f\r\x01\x1f\x7f \u00e9\u20ac\U0001f600'
    data = zk_data.encode_entity_config({"k": text})
    assert data == ('{"version":1,"config":{"k":"q\\"b\\\\s/\\b\\t\\n\\f\\r\\u0001\\u001F\x7f '
                    '\u00e9\u20ac\\uD83D\\uDE00"}}').encode("utf-8")
    assert zk_data.decode_entity_config(data) == {"k": text}
    with pytest.raises(ZkDataError):
        zk_data.encode_entity_config({"k": "\ud800"})  # a lone surrogate is no UTF-8


def test_kafka_uuid_strings():
    value = uuid.UUID("70caf71a-7544-497d-8bdd-bc8f19ff7795")
    assert zk_data.uuid_from_string(zk_data.uuid_to_string(value)) == value
    assert zk_data.uuid_to_string(TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert not zk_data.uuid_to_string(zk_data.new_topic_id()).startswith("-")
    for bad in ("", "AAAA", "A" * 23, "AAAAAAAAAAAAAAAAAAAAA+", 5):
        with pytest.raises(ZkDataError):
            zk_data.uuid_from_string(bad)


# ----------------------------------------------------------------- decoders: bad bytes


_BAD_JSON = [None, b"", b"\xff\xfe", b"not json", b"[1,2]", b'"x"', b"{", b"[" * 100000]

_DECODERS = {
    "controller": zk_data.decode_controller,
    "broker": lambda data: zk_data.decode_broker(1, data),
    "topic": lambda data: zk_data.decode_topic("t", data),
    "state": lambda data: zk_data.decode_partition_state(data, zk_version=0),
    "config_change": zk_data.decode_config_change,
    "isr_change": zk_data.decode_isr_change,
    "reassign": zk_data.decode_reassign_partitions,
    "log_dir_event": zk_data.decode_log_dir_event,
    "cluster_id": zk_data.decode_cluster_id,
    "producer_id_block": zk_data.decode_producer_id_block,
}


@pytest.mark.parametrize("name", sorted(_DECODERS))
@pytest.mark.parametrize("data", _BAD_JSON, ids=lambda d: repr(d)[:12])
def test_every_decoder_raises_typed_on_bad_json(name, data):
    with pytest.raises(ZkDataError):
        _DECODERS[name](data)


@pytest.mark.parametrize("name, data", [
    ("controller", b'{"version":1}'),
    ("controller", b'{"brokerid":"1"}'),
    ("controller", b'{"brokerid":true}'),
    ("controller", b'{"brokerid":2147483648}'),
    ("broker", b'{"version":0}'),
    ("broker", b'{"version":5,"endpoints":[]}'),
    ("broker", b'{"version":5,"endpoints":["nohost"]}'),
    ("broker", b'{"version":5,"endpoints":["PLAINTEXT://h:99999999999"]}'),
    ("broker", b'{"version":5,"endpoints":["PLAINTEXT://h:1"],"rack":5}'),
    ("topic", b'{"partitions":{"x":[1]}}'),
    ("topic", b'{"partitions":{"-1":[1]}}'),
    ("topic", b'{"partitions":{"0":[1.5]}}'),
    ("topic", b'{"partitions":{"0":1}}'),
    ("topic", b'{"partitions":[]}'),
    ("topic", b'{"partitions":{},"topic_id":"short"}'),
    ("state", b'{"leader":1,"leader_epoch":0,"controller_epoch":1}'),
    ("state", b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":"1"}'),
    ("state", b'{"leader":null,"leader_epoch":0,"controller_epoch":1,"isr":[]}'),
    ("config_change", b'{"version":1,"entity_path":"topics/t"}'),
    ("isr_change", b'{"version":1,"partitions":[{"topic":"t"}]}'),
    ("isr_change", b'{"version":1,"partitions":[1]}'),
    ("reassign", b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'),
    ("cluster_id", b'{"version":"1","id":1}'),
    ("producer_id_block", b'{"version":1,"broker":1,"block_start":0,"block_end":"9"}'),
    ("producer_id_block", b'{"version":1,"broker":1,"block_start":"0","block_end":"1e3"}'),
    ("producer_id_block",
     b'{"version":1,"broker":1,"block_start":"0","block_end":"9223372036854775808"}'),
])
def test_every_decoder_raises_typed_on_wrong_keys_or_types(name, data):
    with pytest.raises(ZkDataError):
        _DECODERS[name](data)


@pytest.mark.parametrize("data", [None, b"", b"x", b"1.5", b"99999999999", b"\xff"])
def test_controller_epoch_raises_typed_on_bad_bytes(data):
    with pytest.raises(ZkDataError):
        zk_data.decode_controller_epoch(data)


def test_config_values_must_be_strings():
    with pytest.raises(ZkDataError):
        zk_data.decode_entity_config(b'{"version":1,"config":{"a":1}}')
    with pytest.raises(ZkDataError):
        zk_data.decode_entity_config(b"{bad")


# ------------------------------------------------- differential: the JVM's own bytes (kafka)

_JAVA_SOURCE = r"""
import com.fasterxml.jackson.databind.ObjectMapper;
import scala.Tuple2;
import scala.collection.immutable.ArraySeq;
import scala.jdk.javaapi.CollectionConverters;
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

/** Kafka 2.8's ZkData encoders, rebuilt from the same Scala collections and Jackson. */
@SuppressWarnings({"unchecked", "rawtypes"})
public class ZkOrder {
  static final ObjectMapper MAPPER = new ObjectMapper();
  static Object imm(Object... kv) {
    Tuple2[] a = new Tuple2[kv.length / 2];
    for (int i = 0; i < a.length; i++) a[i] = new Tuple2(kv[2 * i], kv[2 * i + 1]);
    return CollectionConverters.asJava((scala.collection.immutable.Map)
        scala.collection.immutable.Map$.MODULE$.from(ArraySeq.unsafeWrapArray(a)));
  }
  static scala.collection.mutable.Map mut(Object... kv) {
    Tuple2[] a = new Tuple2[kv.length / 2];
    for (int i = 0; i < a.length; i++) a[i] = new Tuple2(kv[2 * i], kv[2 * i + 1]);
    return (scala.collection.mutable.Map) scala.collection.mutable.Map$.MODULE$.from(ArraySeq.unsafeWrapArray(a));
  }
  static void put(scala.collection.mutable.Map m, Object k, Object v) { m.addOne(new Tuple2(k, v)); }
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    String line;
    while ((line = in.readLine()) != null) {
      String[] f = line.split(" ");
      Object value;
      switch (f[0]) {
        case "topic": {  // topic n withId: TopicZNode.encode, partition p -> [p, p+1]
          scala.collection.mutable.Map parts = mut();
          for (int p = 0; p < Integer.parseInt(f[1]); p++) put(parts, Integer.toString(p), Arrays.asList(p, p + 1));
          scala.collection.mutable.Map t = mut("version", 3, "partitions", CollectionConverters.asJava(parts),
              "adding_replicas", CollectionConverters.asJava(mut()), "removing_replicas", CollectionConverters.asJava(mut()));
          if (f[2].equals("1")) put(t, "topic_id", "AAAAAAAAAAAAAAAAAAAAAA");
          value = CollectionConverters.asJava(t);
          break;
        }
        case "config": {  // config xK1 xV1 ... ("x" + hex of the UTF-8): ConfigEntityZNode.encode
          Properties p = new Properties();
          for (int i = 1; i + 1 < f.length; i += 2) p.setProperty(unhex(f[i]), unhex(f[i + 1]));
          value = imm("version", 1, "config", p);
          break;
        }
        case "broker": {  // broker host port rack|-: BrokerIdZNode.encode v5
          scala.collection.mutable.Map b = mut("version", 5, "host", f[1], "port", Integer.parseInt(f[2]),
              "endpoints", Arrays.asList("PLAINTEXT://" + f[1] + ":" + f[2]), "jmx_port", -1, "timestamp", "7");
          if (!f[3].equals("-")) put(b, "rack", f[3]);
          put(b, "listener_security_protocol_map", imm("PLAINTEXT", "PLAINTEXT"));
          put(b, "features", imm());
          value = CollectionConverters.asJava(b);
          break;
        }
        default: {  // state leader epoch controllerEpoch isr...: TopicPartitionStateZNode.encode
          List<Integer> isr = new ArrayList<>();
          for (int i = 4; i < f.length; i++) isr.add(Integer.parseInt(f[i]));
          value = imm("version", 1, "leader", Integer.parseInt(f[1]), "leader_epoch", Integer.parseInt(f[2]),
              "controller_epoch", Integer.parseInt(f[3]), "isr", isr);
        }
      }
      out.println(new String(MAPPER.writeValueAsBytes(value), StandardCharsets.UTF_8));
    }
  }
  static String unhex(String s) {
    s = s.substring(1);
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return new String(b, StandardCharsets.UTF_8);
  }
}
"""


@pytest.mark.kafka
def test_encoders_match_the_jvm_byte_for_byte(tmp_path):
    # The same constructions as Kafka 2.8's code, run on the JVM with the Scala 2.13 library
    # and Jackson from the cached Kafka jars, for many shapes: sizes past each table resize,
    # random config names and values (escapes and non-ASCII included), racks, ISRs.
    import os
    import random
    import shutil
    import subprocess

    from seglog.bench.kafka import find_kafka

    require = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
    ref, why = find_kafka()
    javac = shutil.which("javac")
    if ref is None or javac is None:
        why = why or "no javac on PATH (a JDK is needed to build the reference encoder)"
        if require:
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    jars = [str(p) for pattern in ("scala-library-2.13*.jar", "jackson-core-*.jar",
                                   "jackson-databind-*.jar", "jackson-annotations-*.jar")
            for p in sorted(ref.lib_dir.glob(pattern))[:1]]
    assert len(jars) == 4, f"scala-library/jackson jars missing in {ref.lib_dir}"
    classpath = ":".join(jars)
    (tmp_path / "ZkOrder.java").write_text(_JAVA_SOURCE, encoding="utf-8")
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(tmp_path),
                    str(tmp_path / "ZkOrder.java")], check=True, capture_output=True, timeout=120)

    rng = random.Random(12)
    alphabet = "abcxyz.-_09\"\\/\n\t\x01\x1f\x7f\u00e9\u20ac\U0001f600"
    lines, expected = [], []
    for count in list(range(1, 40)) + [47, 48, 49, 96, 97, 200, 1000]:
        with_id = count % 2 == 0
        lines.append(f"topic {count} {int(with_id)}")
        expected.append(zk_data.encode_topic(TopicAssignment(
            "t", TOPIC_ID if with_id else None, {p: [p, p + 1] for p in range(count)})))
    names = ("cleanup.policy compression.type delete.retention.ms flush.ms min.insync.replicas "
             "retention.bytes retention.ms segment.bytes segment.ms preallocate "
             "unclean.leader.election.enable max.message.bytes").split()
    for _ in range(300):
        keys = list(dict.fromkeys(rng.choice(names) if rng.random() < 0.5 else
                                  "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
                                  for _ in range(rng.randint(0, 30))))
        config = {k: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for k in keys}
        lines.append("config " + " ".join(f"x{k.encode().hex()} x{v.encode().hex()}"
                                          for k, v in config.items()))
        expected.append(zk_data.encode_entity_config(config))
    for rack in ("-", "r1", "rack-b"):
        lines.append(f"broker 127.0.0.{len(rack)} 9092 {rack}")
        expected.append(zk_data.encode_broker(BrokerRegistration(
            1, f"127.0.0.{len(rack)}", 9092, None if rack == "-" else rack), timestamp_ms=7))
    for _ in range(20):
        isr = rng.sample(range(10), rng.randint(0, 4))
        state = PartitionState(rng.randint(-1, 9), rng.randint(0, 10 ** 6), tuple(isr),
                               rng.randint(0, 99))
        lines.append(f"state {state.leader} {state.leader_epoch} {state.controller_epoch} "
                     + " ".join(map(str, isr)))
        expected.append(zk_data.encode_partition_state(state))
    done = subprocess.run([ref.java, "-cp", f"{classpath}:{tmp_path}", "ZkOrder"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          encoding="utf-8", timeout=120, check=True)
    printed = done.stdout.splitlines()
    assert len(printed) == len(expected)
    mismatches = [(line, jvm, ours.decode()) for line, jvm, ours in zip(lines, printed, expected)
                  if jvm.encode() != ours]
    assert not mismatches, mismatches[:3]
