"""The one table of Kafka's configs: every topic config and every broker config of Kafka 4.4,
with seglog's own few, from which everything that reads or shows a config comes.

Each row is a :class:`~seglog.configdef.ConfigKey`: Kafka's name, type, Kafka 4.4's default,
the validator seglog applies, importance, Kafka's documentation, scope (topic, broker or
both), the broker synonyms of a topic config (Kafka's ``ServerTopicConfigSynonyms``), Kafka's
dynamic update mode, and whether seglog implements it. From it come:
:class:`~seglog.storage.config.LogConfig` (one field per implemented topic config, plus two
broker settings a log keeps), :class:`~seglog.server.config.BrokerConfig` (``seglog serve
--config`` and ``server.properties``), DescribeConfigs (values, synonyms, documentation,
read-only flags) and the validation of CreateTopics, AlterConfigs and
IncrementalAlterConfigs, and ``docs/configs.md`` (:func:`seglog.config_docs.configs_markdown`).
``tests/kafka/test_kafka_configs.py`` checks the names, types and defaults against Kafka's own
``ConfigDef``\\ s from its jars.

A Kafka config seglog does not implement (``support=NO``: most of Kafka's ~380 broker
configs, and the few topic configs newer than seglog) is refused by name, never ignored:
:func:`topic_key` and :func:`broker_key` raise :class:`~seglog.errors.InvalidConfigError`
saying so. Where seglog's validator differs from Kafka's, the entry's ``note`` says how
(``segment.bytes``: Kafka 4.4 needs at least 1 MiB, seglog accepts down to 14 bytes, which
its tests use as Kafka's use ``internal.segment.bytes``).

A leaf: it imports :mod:`seglog.configdef` and :mod:`seglog.errors` only, so storage and the
server both read it. Immutable; thread-safe.
"""

from __future__ import annotations

import os

import difflib
from typing import Any, Iterable, Optional

from .configdef import (
    ACCEPTED, BOTH, BROKER, CLUSTER_WIDE, INT32_MAX, INT64_MAX, NO, NO_DEFAULT, PER_BROKER,
    READ_ONLY, TOPIC, ConfigKey, check_connection_overrides, check_gzip_level,
    check_throttled_replicas,
)
from .errors import InvalidConfigError

__all__ = ["AUTHORIZER_CLASS_NAMES", "BROKER_CONFIGS", "CONFIGS", "DESCRIBED_AT_DEFAULT",
           "DESCRIBE_RULE", "DYNAMIC_ONLY", "KAFKA_VERSION", "REMOVED", "SECURITY_NAMES",
           "SECURITY_PREFIXES", "TOPIC_CONFIGS", "broker_key", "not_built", "not_implemented",
           "security_feature", "topic_key", "unknown_broker_config", "unknown_topic_config"]

#: The Kafka release whose names, types and defaults the table carries.
KAFKA_VERSION = "4.4.0"


def _entry(name: str, scope: str, type: str, default: Any, importance: str, doc: str,
           **facts: Any) -> ConfigKey:
    return ConfigKey(name=name, scope=scope, type=type, default=default,
                     importance=importance, doc=doc, **facts)


def _absent(name: str, type: str, default: Any, importance: str, dynamic: str) -> ConfigKey:
    """A Kafka broker config seglog does not implement: refused by name."""
    return ConfigKey(name=name, scope=BROKER, type=type, default=default,
                     importance=importance, doc="", dynamic=dynamic, support=NO)


#: The ``authorizer.class.name`` values naming seglog's authorizer (Kafka's KRaft class and
#: the ZooKeeper era's, the same rules).
AUTHORIZER_CLASS_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer")


def _log_dirs_error(value: Any) -> Optional[str]:
    """Why ``log.dirs`` / ``log.dir`` cannot be ``value``: an entry named twice (Kafka's
    ``KafkaConfig``: "Each log directory must be specified once")."""
    if value is None:
        return None
    normalized = [os.path.normpath(os.path.abspath(str(d))) for d in value]
    if len(set(normalized)) != len(normalized):
        # Kafka's LogManager.createAndValidateLogDirs, word for word.
        return "Duplicate log directory found: " + ", ".join(str(d) for d in value)
    return None


def _authorizer_class_error(value: Any) -> Optional[str]:
    """Why ``authorizer.class.name`` cannot be ``value`` (None when it can)."""
    if value in ("",) + AUTHORIZER_CLASS_NAMES:
        return None
    return (f"authorizer class {value} is not available in seglog: only "
            f"{AUTHORIZER_CLASS_NAMES[0]} (or {AUTHORIZER_CLASS_NAMES[1]}), seglog's ACL "
            "authorizer with Kafka's StandardAuthorizer rules, or empty for none")



#: Every config, topic configs first (in Kafka's order), then broker configs by name.
CONFIGS: tuple[ConfigKey, ...] = (
    # --- topic configs (LogConfig.configDef), with their broker synonyms
    _entry('segment.bytes', TOPIC, 'int', 1073741824, 'medium',
           ('This configuration controls the segment file size for the log. Retention and '
           'cleaning is always done a file at a time so a larger segment size means fewer '
           'files but less granular control over retention.'),
           synonyms=('log.segment.bytes',),
           at_least=14,
           note='Kafka 4.4 needs at least 1048576 (its tests use internal.segment.bytes); '
                'seglog accepts down to 14, which its own tests use.'),
    _entry('segment.ms', TOPIC, 'long', 604800000, 'medium',
           ('This configuration controls the period of time after which Kafka will force the '
           "log to roll even if the segment file isn't full to ensure that retention can "
           'delete or compact old data.'),
           synonyms=('log.roll.ms', 'log.roll.hours'),
           at_least=1),
    _entry('segment.jitter.ms', TOPIC, 'long', 0, 'medium',
           ('The maximum random jitter subtracted from the scheduled segment roll time to '
           'avoid thundering herds of segment rolling'),
           synonyms=('log.roll.jitter.ms', 'log.roll.jitter.hours'),
           at_least=0),
    _entry('segment.index.bytes', TOPIC, 'int', 10485760, 'medium',
           ('This configuration controls the size of the index that maps offsets to file '
           'positions. We preallocate this index file and shrink it only after log rolls. You'
           ' generally should not need to change this setting.'),
           synonyms=('log.index.size.max.bytes',),
           at_least=4),
    _entry('flush.messages', TOPIC, 'long', INT64_MAX, 'medium',
           ('This setting allows specifying an interval at which we will force an fsync of '
           'data written to the log. For example if this was set to 1 we would fsync after '
           'every message; if it were 5 we would fsync after every five messages. In general '
           'we recommend you not set this and use replication for durability and allow the '
           "operating system's background flush capabilities as it is more efficient. This "
           'setting can be overridden on a per-topic basis (see <a href="#topicconfigs">the '
           'per-topic configuration section</a>).'),
           synonyms=('log.flush.interval.messages',),
           at_least=1),
    _entry('flush.ms', TOPIC, 'long', INT64_MAX, 'medium',
           ('This setting allows specifying a time interval at which we will force an fsync of'
           ' data written to the log. For example if this was set to 1000 we would fsync '
           'after 1000 ms had passed. In general we recommend you not set this and use '
           "replication for durability and allow the operating system's background flush "
           'capabilities as it is more efficient.'),
           synonyms=('log.flush.interval.ms', 'log.flush.scheduler.interval.ms'),
           at_least=0),
    _entry('retention.bytes', TOPIC, 'long', -1, 'medium',
           ('This configuration controls the maximum size a partition (which consists of log '
           'segments) can grow to before we will discard old log segments to free up space if'
           ' we are using the "delete" retention policy. By default there is no size limit '
           'only a time limit. Since this limit is enforced at the partition level, multiply '
           'it by the number of partitions to compute the topic retention in bytes. '
           'Additionally, retention.bytes configuration operates independently of '
           '"segment.ms" and "segment.bytes" configurations. Moreover, it triggers the '
           'rolling of new segment if the retention.bytes is configured to zero.'),
           synonyms=('log.retention.bytes',)),
    _entry('retention.ms', TOPIC, 'long', 604800000, 'medium',
           ('This configuration controls the maximum time we will retain a log before we will '
           'discard old log segments to free up space if we are using the "delete" retention '
           'policy. This represents an SLA on how soon consumers must read their data. If set'
           ' to -1, no time limit is applied. Additionally, retention.ms configuration '
           'operates independently of "segment.ms" and "segment.bytes" configurations. '
           'Moreover, it triggers the rolling of new segment if the retention.ms condition is'
           ' satisfied.'),
           synonyms=('log.retention.ms', 'log.retention.minutes', 'log.retention.hours'),
           at_least=-1),
    _entry('max.message.bytes', TOPIC, 'int', 1048588, 'medium',
           ('The largest record batch size allowed by Kafka (after compression if compression '
           'is enabled). If this is increased and there are consumers older than 0.10.2, the '
           "consumers' fetch size must also be increased so that they can fetch record "
           'batches this large. In the latest message format version, records are always '
           'grouped into batches for efficiency. In previous message format versions, '
           'uncompressed records are not grouped into batches and this limit only applies to '
           'a single record in that case.'),
           synonyms=('message.max.bytes',),
           at_least=0),
    _entry('max.decompressed.message.bytes', BOTH, 'int', 2147483639, 'medium',
           ('The maximum decompressed size, in bytes, of a single record the broker will '
           'accept; larger records are rejected with an <code>InvalidRecordException</code>. '
           'It is enforced where the broker decompresses records: produce validation of '
           'compressed batches, log compaction, and offset lookups by timestamp or max '
           'timestamp against the local log or remote storage. Unlike '
           '<code>max.message.bytes</code>, which bounds the compressed batch on the wire, '
           'this bounds the decompressed size of an individual record. Lowering it below the '
           'size of already-stored records makes compaction and timestamp offset lookups of '
           'affected partitions fail until it is raised again. The default imposes no limit '
           'beyond the largest record the broker could allocate anyway; set a smaller value '
           'to enforce a per-record cap.'),
           dynamic=CLUSTER_WIDE,
           support=NO),
    _entry('index.interval.bytes', TOPIC, 'int', 4096, 'medium',
           ('This setting controls how frequently Kafka adds an index entry to its offset '
           'index. The default setting ensures that we index a message roughly every 4096 '
           'bytes. More indexing allows reads to jump closer to the exact position in the log'
           " but makes the index larger. You probably don't need to change this."),
           synonyms=('log.index.interval.bytes',),
           at_least=0),
    _entry('delete.retention.ms', TOPIC, 'long', 86400000, 'medium',
           ('The amount of time to retain delete tombstone markers for <a '
           'href="#compaction">log compacted</a> topics. This setting also gives a bound on '
           'the time in which a consumer must complete a read if they begin from offset 0 to '
           'ensure that they get a valid snapshot of the final stage (otherwise delete '
           'tombstones may be collected before they complete their scan).'),
           synonyms=('log.cleaner.delete.retention.ms',),
           at_least=0),
    _entry('min.compaction.lag.ms', TOPIC, 'long', 0, 'medium',
           ('The minimum time a message will remain uncompacted in the log. Only applicable '
           'for logs that are being compacted.'),
           synonyms=('log.cleaner.min.compaction.lag.ms',),
           at_least=0),
    _entry('max.compaction.lag.ms', TOPIC, 'long', INT64_MAX, 'medium',
           ('The maximum time a message will remain ineligible for compaction in the log. Only'
           ' applicable for logs that are being compacted.'),
           synonyms=('log.cleaner.max.compaction.lag.ms',),
           at_least=1),
    _entry('file.delete.delay.ms', TOPIC, 'long', 60000, 'medium',
           'The time to wait before deleting a file from the filesystem',
           synonyms=('log.segment.delete.delay.ms',),
           at_least=0),
    _entry('min.cleanable.dirty.ratio', TOPIC, 'double', 0.5, 'medium',
           ('This configuration controls how frequently the log compactor will attempt to '
           'clean the log (assuming <a href="#compaction">log compaction</a> is enabled). By '
           'default we will avoid cleaning a log where more than 50% of the log has been '
           'compacted. This ratio bounds the maximum space wasted in the log by duplicates '
           '(at 50% at most 50% of the log could be duplicates). A higher ratio will mean '
           'fewer, more efficient cleanings but will mean more wasted space in the log. If '
           'the max.compaction.lag.ms or the min.compaction.lag.ms configurations are also '
           'specified, then the log compactor considers the log to be eligible for compaction'
           ' as soon as either: (i) the dirty ratio threshold has been met and the log has '
           'had dirty (uncompacted) records for at least the min.compaction.lag.ms duration, '
           'or (ii) if the log has had dirty (uncompacted) records for at most the '
           'max.compaction.lag.ms period.'),
           synonyms=('log.cleaner.min.cleanable.ratio',),
           at_least=0.0,
           at_most=1.0),
    _entry('cleanup.policy', TOPIC, 'list', ('delete',), 'medium',
           ('This config designates the retention policy to use on log segments. The "delete" '
           'policy (which is the default) will discard old segments when their retention time'
           ' or size limit has been reached. The "compact" policy will enable <a '
           'href="#compaction">log compaction</a>, which retains the latest value for each '
           'key. It is also possible to specify both policies in a comma-separated list (e.g.'
           ' "delete,compact"). In this case, old segments will be discarded per the '
           'retention time and size configuration, while retained segments will be compacted.'),
           synonyms=('log.cleanup.policy',),
           choices=('compact', 'delete')),
    _entry('unclean.leader.election.enable', BOTH, 'boolean', False, 'medium',
           ('Indicates whether to enable replicas not in the ISR set to be elected as leader '
           'as a last resort, even though doing so may result in data loss.<p>Note: In KRaft '
           'mode, when enabling this config dynamically, it needs to wait for the unclean '
           'leader electionthread to trigger election periodically (default is 5 minutes). '
           'Please run `kafka-leader-election.sh` with `unclean` option to trigger the '
           'unclean leader election immediately if needed.</p>'),
           dynamic=CLUSTER_WIDE),
    _entry('min.insync.replicas', BOTH, 'int', 1, 'medium',
           ('When a producer sets acks to "all" (or "-1"), this configuration specifies the '
           'minimum number of replicas that must acknowledge a write for the write to be '
           'considered successful. If this minimum cannot be met, then the producer will '
           'raise an exception (either NotEnoughReplicas or '
           'NotEnoughReplicasAfterAppend).<br>When used together, '
           '<code>min.insync.replicas</code> and <code>acks</code> allow you to enforce '
           'greater durability guarantees. A typical scenario would be to create a topic with'
           ' a replication factor of 3, set <code>min.insync.replicas</code> to 2, and '
           'produce with <code>acks</code> of "all". This will ensure that the producer '
           'raises an exception if a majority of replicas do not receive a write.'),
           at_least=1,
           dynamic=CLUSTER_WIDE),
    _entry('compression.type', BOTH, 'string', 'producer', 'medium',
           ('Specify the final compression type for a given topic. This configuration accepts '
           "the standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It "
           "additionally accepts 'uncompressed' which is equivalent to no compression; and "
           "'producer' which means retain the original compression codec set by the producer."),
           choices=('uncompressed', 'zstd', 'lz4', 'snappy', 'gzip', 'producer'),
           aliases=(('none', 'uncompressed'),),
           dynamic=CLUSTER_WIDE,
           note="seglog also reads none (its codec name) as uncompressed; Kafka refuses it."),
    _entry('compression.gzip.level', BOTH, 'int', -1, 'medium',
           'The compression level to use if compression.type is set to <code>gzip</code>.',
           check=check_gzip_level,
           dynamic=CLUSTER_WIDE),
    _entry('compression.lz4.level', BOTH, 'int', 9, 'medium',
           'The compression level to use if compression.type is set to <code>lz4</code>.',
           at_least=1,
           at_most=17,
           dynamic=CLUSTER_WIDE),
    _entry('compression.zstd.level', BOTH, 'int', 3, 'medium',
           'The compression level to use if compression.type is set to <code>zstd</code>.',
           at_least=-131072,
           at_most=22,
           dynamic=CLUSTER_WIDE),
    _entry('preallocate', TOPIC, 'boolean', False, 'medium',
           'True if we should preallocate the file on disk when creating a new log segment.',
           synonyms=('log.preallocate',)),
    _entry('message.timestamp.type', TOPIC, 'string', 'CreateTime', 'medium',
           ('Define whether the timestamp in the message is message create time or log append '
           'time. The value should be either `CreateTime` or `LogAppendTime`'),
           synonyms=('log.message.timestamp.type',),
           choices=('CreateTime', 'LogAppendTime')),
    _entry('message.timestamp.before.max.ms', TOPIC, 'long', INT64_MAX, 'medium',
           ("This configuration sets the allowable timestamp difference between the broker's "
           'timestamp and the message timestamp. The message timestamp can be earlier than or'
           " equal to the broker's timestamp, with the maximum allowable difference "
           'determined by the value set in this configuration. If '
           'message.timestamp.type=CreateTime, the message will be rejected if the difference'
           ' in timestamps exceeds this specified threshold. This configuration is ignored if'
           ' message.timestamp.type=LogAppendTime.'),
           synonyms=('log.message.timestamp.before.max.ms',),
           at_least=0),
    _entry('message.timestamp.after.max.ms', TOPIC, 'long', 3600000, 'medium',
           ('This configuration sets the allowable timestamp difference between the message '
           "timestamp and the broker's timestamp. The message timestamp can be later than or "
           "equal to the broker's timestamp, with the maximum allowable difference determined"
           ' by the value set in this configuration. If message.timestamp.type=CreateTime, '
           'the message will be rejected if the difference in timestamps exceeds this '
           'specified threshold. This configuration is ignored if '
           'message.timestamp.type=LogAppendTime.'),
           synonyms=('log.message.timestamp.after.max.ms',),
           at_least=0),
    _entry('leader.replication.throttled.replicas', TOPIC, 'list', (), 'medium',
           ('A list of replicas for which log replication should be throttled on the leader '
           'side. The list should describe a set of replicas in the form '
           '[PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the '
           "wildcard '*' can be used to throttle all replicas for this topic."),
           check=check_throttled_replicas),
    _entry('follower.replication.throttled.replicas', TOPIC, 'list', (), 'medium',
           ('A list of replicas for which log replication should be throttled on the follower '
           'side. The list should describe a set of replicas in the form '
           '[PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the '
           "wildcard '*' can be used to throttle all replicas for this topic."),
           check=check_throttled_replicas),
    _entry('remote.storage.enable', TOPIC, 'boolean', False, 'medium',
           ('To enable tiered storage for a topic, set this configuration as true. You can not'
           ' disable this config once it is enabled. It will be provided in future versions.')),
    _entry('local.retention.ms', TOPIC, 'long', -2, 'medium',
           ('The number of milliseconds to keep the local log segment before it gets deleted. '
           'Default value is -2, it represents `retention.ms` value is to be used. The '
           'effective value should always be less than or equal to `retention.ms` value.'),
           synonyms=('log.local.retention.ms',),
           at_least=-2),
    _entry('local.retention.bytes', TOPIC, 'long', -2, 'medium',
           ('The maximum size of local log segments that can grow for a partition before it '
           'deletes the old segments. Default value is -2, it represents `retention.bytes` '
           'value to be used. The effective value should always be less than or equal to '
           '`retention.bytes` value.'),
           synonyms=('log.local.retention.bytes',),
           at_least=-2),
    _entry('remote.log.copy.disable', TOPIC, 'boolean', False, 'medium',
           ('Determines whether tiered data for a topic should become read only, and no more '
           'data uploading on a topic. Once this config is set to true, the local retention '
           'configuration (i.e. local.retention.ms/bytes) becomes irrelevant, and all data '
           'expiration follows the topic-wide retention configuration(i.e. '
           'retention.ms/bytes).')),
    _entry('remote.copy.lag.ms', TOPIC, 'long', 0, 'medium',
           ('Controls one of the two upload eligibility checks (time and size) for copying '
           'segments to remote storage. A non-active segment is upload-eligible when either '
           'this time-based check or <code>remote.copy.lag.bytes</code> is satisfied. When '
           'set to 0, uploads are immediately eligible regardless of lag checks. When set to '
           'a positive value (ms), the segment is time-eligible once elapsed time since its '
           'latest record reaches this value. When set to -1, this value is derived from '
           'effective local retention time (<code>local.retention.ms</code>). If that '
           'effective local retention time is unlimited (-1), this time-based check is not '
           'applied. A positive value should not exceed effective local retention time unless'
           ' local retention is unlimited (-1).'),
           synonyms=('log.remote.copy.lag.ms',),
           support=NO),
    _entry('remote.copy.lag.bytes', TOPIC, 'long', -1, 'medium',
           ('Controls one of the two upload eligibility checks (time and size) for copying '
           'segments to remote storage. A non-active segment is upload-eligible when either '
           'this size-based check or <code>remote.copy.lag.ms</code> is satisfied. When set '
           'to 0, uploads are immediately eligible regardless of lag checks. When set to a '
           'positive value (bytes), the segment is size-eligible once bytes of newer local '
           'log data after that segment reaches this value. When set to -1, this value is '
           'derived from effective local retention size (<code>local.retention.bytes</code>).'
           ' If that effective local retention size is unlimited (-1), this size-based check '
           'is not applied. A positive value should not exceed effective local retention size'
           ' unless local retention is unlimited (-1).'),
           synonyms=('log.remote.copy.lag.bytes',),
           support=NO),
    _entry('remote.log.delete.on.disable', TOPIC, 'boolean', False, 'medium',
           ('Determines whether tiered data for a topic should be deleted after tiered storage'
           ' is disabled on a topic. This configuration should be enabled when trying to set '
           '`remote.storage.enable` from true to false')),
    _entry('errors.deadletterqueue.group.enable', TOPIC, 'boolean', False, 'medium',
           ('Enable this topic to be used as a dead-letter queue for share groups. When set to'
           ' <code>true</code>, share groups can write undeliverable records to this topic. '
           'When set to <code>false</code> (the default), attempts to use this topic as a DLQ'
           ' will be rejected.'),
           note=('A share group writes its DLQ records only to a topic with this set '
                 '(seglog.server.share_dlq).')),
    _entry('internal.segment.bytes', TOPIC, 'int', None, 'medium',
           'The maximum size of a single log file. This should be used for testing only.',
           support=NO,
           internal=True),
    # --- broker configs seglog takes
    _entry('advertised.listeners', BROKER, 'list', None, 'high',
           ('Specifies the listener addresses that the Kafka brokers will advertise to clients'
           ' and other brokers. The config is useful where the actual listener configuration '
           '<code>listeners</code> does not represent the addresses that clients should use '
           'to connect, such as in cloud environments. The addresses are published to and '
           'managed by the controller, the brokers pull these data from the controller as '
           'needed. In IaaS environments, this may need to be different from the interface to'
           ' which the broker binds. If this is not set, the value for <code>listeners</code>'
           ' will be used. Unlike <code>listeners</code>, it is not valid to advertise the '
           '0.0.0.0 meta-address.  Also unlike <code>listeners</code>, there can be '
           'duplicated ports in this property, so that one listener can be configured to '
           "advertise another listener's address. This can be useful in some cases where "
           'external load balancers are used.'),
           note=('The address given to clients in Metadata (names among listeners, as '
                'Kafka checks them); null: the listen address.')),
    _entry('allow.everyone.if.no.acl.found', BROKER, 'boolean', False, 'medium',
           ('Whether every principal may act on a resource that has no ACL at all (read by '
           "Kafka's StandardAuthorizer from the broker configs; not in the broker's "
           'ConfigDef).'),
           note="Read by seglog's ACL authorizer, as Kafka's StandardAuthorizer reads it."),
    _entry('authorizer.class.name', BROKER, 'string', '', 'low',
           ('The fully qualified name of a class that implements '
           '<code>org.apache.kafka.server.authorizer.Authorizer</code> interface, which is '
           'used by the broker for authorization.'),
           check=_authorizer_class_error,
           note=('org.apache.kafka.metadata.authorizer.StandardAuthorizer (or the ZooKeeper '
                 "era's kafka.security.authorizer.AclAuthorizer, same rules) names seglog's "
                 'ACL authorizer; any other class is refused by name; empty: no '
                 'authorization (everything allowed).')),
    _entry('auto.create.topics.enable', BROKER, 'boolean', True, 'high',
           'Enable auto creation of topic on the server.',
           note='Create a topic on Metadata or Produce for a name that does not exist.'),
    _entry('auto.leader.rebalance.enable', BROKER, 'boolean', True, 'high',
           ('Enables auto leader balancing. A background thread checks the distribution of '
           'partition leaders at regular intervals, configurable by '
           'leader.imbalance.check.interval.seconds. If the leader is imbalanced, leader '
           'rebalance to the preferred leader for partitions is triggered.'),
           note=("In a cluster the controller moves leadership back to each partition's "
                "preferred replica when a broker's share of non-preferred leaders passes "
                'leader.imbalance.per.broker.percentage (checked every '
                'leader.imbalance.check.interval.seconds).')),
    _entry('broker.id', BROKER, 'int', -1, 'high',
           ('The broker id for this server. This configuration is deprecated and will be '
           'removed in Apache Kafka 5.0. Please use <code>node.id</code> instead.'),
           note="The broker's id (-1: node.id, else 1)."),
    _entry('connections.max.idle.ms', BROKER, 'long', 600000, 'medium',
           ('Idle connections timeout: the server socket processor threads close the '
           'connections that idle more than this'),
           note='Close a connection with no request in flight that was idle this long.'),
    _entry('controller.listener.names', BROKER, 'list', NO_DEFAULT, 'high',
           ('A comma-separated list of the names of the listeners used by the controller. This'
           ' is required when communicating with the controller quorum, the broker will '
           'always use the first listener in this list.'),
           support=ACCEPTED,
           note='Accepted, unused (no KRaft quorum).'),
    _entry('controller.quorum.bootstrap.servers', BROKER, 'list', (), 'high',
           ('List of endpoints to use for bootstrapping the cluster metadata. The endpoints '
           'are specified in comma-separated list of <code>{host}:{port}</code> entries. For '
           'example: <code>localhost:9092,localhost:9093,localhost:9094</code>.'),
           support=ACCEPTED,
           note='Accepted, unused.'),
    _entry('controller.quorum.voters', BROKER, 'list', (), 'high',
           ('Map of id/endpoint information for the set of voters in a comma-separated list of'
           ' <code>{id}@{host}:{port}</code> entries. This is the old way of defining '
           'membership for controller quorums and should NOT be set if using dynamic quorums.'
           ' Instead, controller.quorum.bootstrap.servers should be set,and the voter set is '
           'determined by the --standalone or --initial-controllers flags when formatting.For'
           ' example: <code>1@localhost:9092,2@localhost:9093,3@localhost:9094</code>'),
           support=ACCEPTED,
           note='Accepted, unused.'),
    _entry('default.replication.factor', BROKER, 'int', 1, 'medium',
           ('The default replication factor per topic. This configuration affects the '
           'following paths:<ul>  <li>1. Auto topic creation</li>  <li>2. Internal streams '
           'topic creation</li>  <li>3. Topic creation via '
           '<code>AdminClient#createTopics</code> when the replication factor is set to '
           '-1</li></ul><p>For (1), the value from the broker configuration is used only when'
           ' it is explicitly set. If it is not explicitly configured on the broker, the '
           'value from the controller configuration is used.<br/>For (2) and (3), the value '
           'from the controller configuration is always used.</p>'),
           at_least=1,
           note=('Replication factor of a topic created without one (auto-created, or -1 in '
                'CreateTopics); a single-node broker refuses more than 1.')),
    _entry('delete.topic.enable', BROKER, 'boolean', True, 'high',
           ('When set to true, topics can be deleted by the admin client. When set to false, '
           'deletion requests will be explicitly rejected by the broker.'),
           note='Allow DeleteTopics.'),
    _entry('max.incremental.fetch.session.cache.slots', BROKER, 'int', 1000, 'medium',
           ('The maximum number of total incremental fetch sessions that we will maintain. '
           'FetchSessionCache is sharded into 8 shards and the limit is equally divided among '
           'all shards. Sessions are allocated to each shard in round-robin. Only entries '
           'within a shard are considered eligible for eviction.'),
           at_least=0,
           dynamic=READ_ONLY,
           note=('Fetch sessions (KIP-227) the broker keeps; eviction as Kafka '
                 '(seglog.server.fetch_sessions).')),
    _entry('fetch.max.bytes', BROKER, 'int', 57671680, 'medium',
           ('The maximum number of bytes we will return for a fetch request. Must be at least '
           '1024.'),
           at_least=1024,
           note='Largest Fetch response.'),
    _entry('group.coordinator.rebalance.protocols', BROKER, 'list',
           ('classic', 'consumer', 'streams'), 'medium',
           ('This configuration is deprecated and will be removed in Kafka 5.0. The list of '
           'enabled rebalance protocols. In Kafka 5.0, all protocols will always be enabled '
           'and cannot be disabled via this configuration. Use feature versions '
           '(group.version, streams.version, share.version) managed by kafka-features.sh '
           'instead.'),
           support=ACCEPTED,
           note='Accepted; the classic and consumer (KIP-848) protocols are served.'),
    _entry('group.initial.rebalance.delay.ms', BROKER, 'int', 3000, 'medium',
           ('The amount of time the group coordinator will wait for more consumers to join a '
           'new group before performing the first rebalance. A longer delay means potentially'
           ' fewer rebalances, but increases the time until processing begins.'),
           note=('Wait this long for more members before the first rebalance of an empty '
                 'classic group, again while new members keep joining (up to the rebalance '
                 'timeout); in-process groups of the embedded Store rebalance at once.')),
    _entry('group.max.session.timeout.ms', BROKER, 'int', 1800000, 'medium',
           ('The maximum allowed session timeout for registered consumers. Longer timeouts '
           'give consumers more time to process messages in between heartbeats at the cost of'
           ' a longer time to detect failures.'),
           note='Largest session timeout allowed.'),
    _entry('group.max.size', BROKER, 'int', INT32_MAX, 'medium',
           'The maximum number of consumers that a single consumer group can accommodate.',
           at_least=1,
           note='Most members of a group.'),
    _entry('group.min.session.timeout.ms', BROKER, 'int', 6000, 'medium',
           ('The minimum allowed session timeout for registered consumers. Shorter timeouts '
           'result in quicker failure detection at the cost of more frequent consumer '
           'heartbeating, which can overwhelm broker resources.'),
           note='Smallest session timeout allowed.'),
    _entry('inter.broker.listener.name', BROKER, 'string', None, 'medium',
           ('Name of listener used for communication between brokers. If this is unset, the '
           'listener name is defined by security.inter.broker.protocol. It is an error to set'
           ' this and security.inter.broker.protocol properties at the same time.'),
           note=('Checked as Kafka checks it (an advertised listener; null: PLAINTEXT); '
                'followers and transaction markers connect to other brokers on it (TLS on '
                'an SSL listener, with its keystore as the client certificate).')),
    _entry('leader.imbalance.check.interval.seconds', BROKER, 'long', 300, 'high',
           ('The frequency with which the partition rebalance check is triggered by the '
           'controller'),
           at_least=1,
           note=('How often the controller checks the leader imbalance '
                '(auto.leader.rebalance.enable).')),
    _entry('leader.imbalance.per.broker.percentage', BROKER, 'int', 10, 'high',
           ("The share of a broker's partitions led elsewhere above which the controller "
           'rebalances.'),
           at_least=0,
           at_most=100,
           kafka=False),
    _entry('listener.security.protocol.map', BROKER, 'string',
           'SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT', 'low',
           ('Map between listener names and security protocols. This must be defined for the '
           'same security protocol to be usable in more than one port or IP. For example, '
           'internal and external traffic can be separated even if SSL is required for both. '
           'Concretely, the user could define listeners with names INTERNAL and EXTERNAL and '
           'this property as: <code>INTERNAL:SSL,EXTERNAL:SSL</code>. As shown, key and value'
           ' are separated by a colon and map entries are separated by commas. Each listener '
           'name should only appear once in the map. Different security (SSL and SASL) '
           'settings can be configured for each listener by adding a normalised prefix (the '
           'listener name is lowercased) to the config name. For example, to set a different '
           'keystore for the INTERNAL listener, a config with name '
           '<code>listener.name.internal.ssl.keystore.location</code> would be set. If the '
           'config for the listener name is not set, the config will fallback to the generic '
           'config (i.e. <code>ssl.keystore.location</code>). Note that in KRaft a default '
           'mapping from the listener names defined by <code>controller.listener.names</code>'
           ' to PLAINTEXT is assumed if no explicit mapping is provided and no other security'
           ' protocol is in use.'),
           dynamic=PER_BROKER,
           note=('Listener name to security protocol, read as Kafka reads it; PLAINTEXT, SSL, '
                'SASL_PLAINTEXT and SASL_SSL are served (a protocol not built would be refused '
                'at start, never served as PLAINTEXT).')),
    _entry('listeners', BROKER, 'list', ('PLAINTEXT://:9092',), 'high',
           ('Listener List - Comma-separated list of URIs we will listen on and the listener '
           'names. If the listener name is not a security protocol, '
           '<code>listener.security.protocol.map</code> must also be set.  Listener names and'
           ' port numbers must be unique unless one listener is an IPv4 address and the other'
           ' listener is an IPv6 address (for the same port).  Specify hostname as 0.0.0.0 to'
           ' bind to all interfaces.  Leave hostname empty to bind to default interface.  '
           'Examples of legal listener lists:  '
           '<code>PLAINTEXT://myhost:9092,SSL://:9091</code>  '
           '<code>CLIENT://0.0.0.0:9092,REPLICATION://localhost:9093</code>  '
           '<code>PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092</code> '),
           dynamic=PER_BROKER,
           note=('Where to listen, as name://host:port: every broker listener (PLAINTEXT, SSL, '
                'SASL_PLAINTEXT, SASL_SSL), one socket each (--listen moves the first; '
                'controller.listener.names are not served); a PLAINTEXT listener beyond '
                'loopback logs a warning.')),
    _entry('log.cleaner.dedupe.buffer.size', BROKER, 'long', 134217728, 'medium',
           'The total memory used for log deduplication across all cleaner threads',
           at_least=1048577,
           dynamic=CLUSTER_WIDE,
           note='Compaction key map budget.'),
    _entry('log.cleaner.delete.retention.ms', BROKER, 'long', 86400000, 'medium',
           ('The amount of time to retain tombstone message markers for log compacted topics. '
           'This setting also gives a bound on the time in which a consumer must complete a '
           'read if they begin from offset 0 to ensure that they get a valid snapshot of the '
           'final stage (otherwise  tombstones messages may be collected before a consumer '
           'completes their scan).'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='How long compaction keeps tombstones.'),
    _entry('log.cleaner.enable', BROKER, 'boolean', True, 'medium',
           ('This configuration has been deprecated and will be removed in Kafka 5.0. Users '
           'should not set it to false to prepare for its future removal. Enable the log '
           'cleaner process to run on the server. Should be enabled if using any topics with '
           'a cleanup.policy=compact including the internal offsets topic. If disabled those '
           'topics will not be compacted and continually grow in size.'),
           support=ACCEPTED,
           note='Accepted; compaction runs in the maintenance task for compacted topics.'),
    _entry('log.cleaner.max.compaction.lag.ms', BROKER, 'long', INT64_MAX, 'medium',
           ('The maximum time a message will remain ineligible for compaction in the log. Only'
           ' applicable for logs that are being compacted.'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           note='Maximum compaction lag.'),
    _entry('log.cleaner.min.cleanable.ratio', BROKER, 'double', 0.5, 'medium',
           ('The minimum ratio of dirty log to total log for a log to eligible for cleaning. '
           'If the log.cleaner.max.compaction.lag.ms or the log.cleaner.min.compaction.lag.ms'
           ' configurations are also specified, then the log compactor considers the log '
           'eligible for compaction as soon as either: (i) the dirty ratio threshold has been'
           ' met and the log has had dirty (uncompacted) records for at least the '
           'log.cleaner.min.compaction.lag.ms duration, or (ii) if the log has had dirty '
           '(uncompacted) records for at most the log.cleaner.max.compaction.lag.ms period.'),
           at_least=0.0,
           at_most=1.0,
           dynamic=CLUSTER_WIDE,
           note='Dirty ratio that triggers compaction.'),
    _entry('log.cleaner.min.compaction.lag.ms', BROKER, 'long', 0, 'medium',
           ('The minimum time a message will remain uncompacted in the log. Only applicable '
           'for logs that are being compacted.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Minimum compaction lag.'),
    _entry('log.cleaner.threads', BROKER, 'int', 1, 'medium',
           'The number of background threads to use for log cleaning',
           at_least=0,
           dynamic=CLUSTER_WIDE,
           support=ACCEPTED,
           note='Accepted; compaction runs on the maintenance task.'),
    _entry('log.cleanup.policy', BROKER, 'list', ('delete',), 'medium',
           ('This config designates the retention policy to use on log segments. The "delete" '
           'policy (which is the default) will discard old segments when their retention time'
           ' or size limit has been reached. The "compact" policy will enable <a '
           'href="https://kafka.apache.org/documentation/#compaction">log compaction</a>, '
           'which retains the latest value for each key. It is also possible to specify both '
           'policies in a comma-separated list (e.g. "delete,compact"). In this case, old '
           'segments will be discarded per the retention time and size configuration, while '
           'retained segments will be compacted. An empty list means infinite retention - no '
           'cleanup policies will be applied and log segments will be retained indefinitely. '
           'Note that with remote storage enabled, local retention limits '
           '(log.local.retention.ms and log.local.retention.bytes) are still applied to local'
           ' segments.'),
           choices=('compact', 'delete'),
           dynamic=CLUSTER_WIDE,
           note='delete and/or compact.'),
    _entry('log.dir', BROKER, 'list', ('/tmp/kafka-logs',), 'high',
           ('A comma-separated list of the directories where the log data is stored. '
           '(supplemental to log.dirs property)'),
           check=_log_dirs_error,
           note='The data directories when log.dirs is null (several: JBOD, as log.dirs).'),
    _entry('log.dirs', BROKER, 'list', None, 'high',
           ('A comma-separated list of the directories where the log data is stored. If not '
           'set, the value in log.dir is used.'),
           check=_log_dirs_error,
           note='The data directories (null: log.dir). Several (JBOD): each holds its own '
                'meta.properties, lock and checkpoints; a new partition goes to the dir '
                'holding the fewest; a failed dir takes only its partitions offline; '
                'AlterReplicaLogDirs moves a partition between them.'),
    _entry('log.flush.interval.messages', BROKER, 'long', INT64_MAX, 'high',
           ('The number of messages accumulated on a log partition before messages are flushed'
           ' to disk.'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           note='Fsync after this many records.'),
    _entry('log.flush.interval.ms', BROKER, 'long', None, 'high',
           ('The maximum time in ms that a message in any topic is kept in memory before '
           'flushed to disk. If not set, the value in log.flush.scheduler.interval.ms is used'),
           dynamic=CLUSTER_WIDE,
           note='Fsync when the last flush is this old (null: log.flush.scheduler.interval.ms).'),
    _entry('log.flush.scheduler.interval.ms', BROKER, 'long', INT64_MAX, 'high',
           ('The frequency in ms that the log flusher checks whether any log needs to be '
           'flushed to disk'),
           note='See log.flush.interval.ms.'),
    _entry('log.index.interval.bytes', BROKER, 'int', 4096, 'medium',
           'The interval with which we add an entry to the offset index.',
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Bytes between index entries.'),
    _entry('log.index.size.max.bytes', BROKER, 'int', 10485760, 'medium',
           'The maximum size in bytes of the offset index',
           at_least=4,
           dynamic=CLUSTER_WIDE,
           note='Largest offset or time index.'),
    _entry('log.message.timestamp.after.max.ms', BROKER, 'long', 3600000, 'medium',
           ('This configuration sets the allowable timestamp difference between the message '
           "timestamp and the broker's timestamp. The message timestamp can be later than or "
           "equal to the broker's timestamp, with the maximum allowable difference determined"
           ' by the value set in this configuration. If '
           'log.message.timestamp.type=CreateTime, the message will be rejected if the '
           'difference in timestamps exceeds this specified threshold. This configuration is '
           'ignored if log.message.timestamp.type=LogAppendTime.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note="Largest distance of a CreateTime timestamp after the broker's clock."),
    _entry('log.message.timestamp.before.max.ms', BROKER, 'long', INT64_MAX, 'medium',
           ("This configuration sets the allowable timestamp difference between the broker's "
           'timestamp and the message timestamp. The message timestamp can be earlier than or'
           " equal to the broker's timestamp, with the maximum allowable difference "
           'determined by the value set in this configuration. If '
           'log.message.timestamp.type=CreateTime, the message will be rejected if the '
           'difference in timestamps exceeds this specified threshold. This configuration is '
           'ignored if log.message.timestamp.type=LogAppendTime.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note="Largest distance of a CreateTime timestamp before the broker's clock."),
    _entry('log.message.timestamp.type', BROKER, 'string', 'CreateTime', 'medium',
           ('Define whether the timestamp in the message is message create time or log append '
           'time. The value should be either <code>CreateTime</code> or '
           '<code>LogAppendTime</code>.'),
           choices=('CreateTime', 'LogAppendTime'),
           dynamic=CLUSTER_WIDE,
           note='CreateTime or LogAppendTime.'),
    _entry('log.preallocate', BROKER, 'boolean', False, 'medium',
           ('Should pre allocate file when create new segment? If you are using Kafka on '
           'Windows, you probably need to set it to true.'),
           dynamic=CLUSTER_WIDE,
           note='Preallocate segment files.'),
    _entry('log.retention.bytes', BROKER, 'long', -1, 'high',
           'The maximum size of the log before deleting it',
           dynamic=CLUSTER_WIDE,
           note='Retention size per partition; -1: no limit.'),
    _entry('log.retention.check.interval.ms', BROKER, 'long', 300000, 'medium',
           ('The frequency in milliseconds that the log cleaner checks whether any log is '
           'eligible for deletion'),
           at_least=1,
           note='How often retention, compaction and flush.ms run.'),
    _entry('log.retention.hours', BROKER, 'int', 168, 'high',
           ('The number of hours to keep a log file before deleting it (in hours), tertiary to'
           ' log.retention.ms property'),
           at_least=-1,
           note='Retention time in hours.'),
    _entry('log.retention.minutes', BROKER, 'int', None, 'high',
           ('The number of minutes to keep a log file before deleting it (in minutes), '
           'secondary to log.retention.ms property. If not set, the value in '
           'log.retention.hours is used'),
           at_least=-1,
           note='Retention time in minutes (null: hours).'),
    _entry('log.retention.ms', BROKER, 'long', None, 'high',
           ('The number of milliseconds to keep a log file before deleting it (in '
           'milliseconds), If not set, the value in log.retention.minutes is used. If set to '
           '-1, no time limit is applied.'),
           at_least=-1,
           dynamic=CLUSTER_WIDE,
           note='Retention time (null: log.retention.minutes); -1 keeps forever.'),
    _entry('log.roll.hours', BROKER, 'int', 168, 'high',
           ('The maximum time before a new log segment is rolled out (in hours), secondary to '
           'log.roll.ms property'),
           at_least=1,
           note='Roll a segment this many hours old.'),
    _entry('log.roll.jitter.hours', BROKER, 'int', 0, 'high',
           ('The maximum jitter to subtract from logRollTimeMillis (in hours), secondary to '
           'log.roll.jitter.ms property'),
           at_least=0,
           note='Roll jitter in hours.'),
    _entry('log.roll.jitter.ms', BROKER, 'long', None, 'high',
           ('The maximum jitter to subtract from logRollTimeMillis (in milliseconds). If not '
           'set, the value in log.roll.jitter.hours is used'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Roll jitter (null: log.roll.jitter.hours).'),
    _entry('log.roll.ms', BROKER, 'long', None, 'high',
           ('The maximum time before a new log segment is rolled out (in milliseconds). If not'
           ' set, the value in log.roll.hours is used'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           note='Roll a segment this old (null: log.roll.hours).'),
    _entry('log.segment.bytes', BROKER, 'int', 1073741824, 'high',
           'The maximum size of a single log file',
           at_least=14,
           dynamic=CLUSTER_WIDE,
           note='Segment size.'),
    _entry('log.segment.delete.delay.ms', BROKER, 'long', 60000, 'high',
           ('The amount of time to wait before deleting a file from the filesystem. If the '
           'value is 0 and there is no file to delete, the system will wait 1 millisecond. '
           'Low value will cause busy waiting'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note="Delay before a deleted segment's files are removed."),
    _entry('max.request.partition.size.limit', BROKER, 'int', 2000, 'medium',
           'The maximum number of partitions can be served in one request.',
           at_least=1,
           note='DescribeTopicPartitions answers at most this many partitions (and the '
                "request's ResponsePartitionLimit), then a cursor."),
    _entry('max.connection.creation.rate', BROKER, 'int', INT32_MAX, 'medium',
           ('The maximum connection creation rate we allow in the broker at any time. Listener-'
           'level limits may also be configured by prefixing the config name with the listener '
           'prefix, for example, <code>listener.name.internal.max.connection.creation.rate</code>.'
           'Broker-wide connection rate limit should be configured based on broker capacity '
           'while listener limits should be configured based on application requirements. New '
           'connections will be throttled if either the listener or the broker limit is '
           'reached, with the exception of inter-broker listener. Connections on the '
           'inter-broker listener will be throttled only when the listener-level rate limit is '
           'reached.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Over it, accepted connections wait unserved for their turn (Kafka\'s '
                'acceptor sleeps the throttle time), then are served.'),
    _entry('max.connections', BROKER, 'int', INT32_MAX, 'medium',
           ('The maximum number of connections we allow in the broker at any time. This limit '
           'is applied in addition to any per-ip limits configured using '
           'max.connections.per.ip. Listener-level limits may also be configured by prefixing'
           ' the config name with the listener prefix, for example, '
           '<code>listener.name.internal.max.connections.per.ip</code>. Broker-wide limit '
           'should be configured based on broker capacity while listener limits should be '
           'configured based on application requirements. New connections are blocked if '
           'either the listener or broker limit is reached. Connections on the inter-broker '
           'listener are permitted even if broker-wide limit is reached. The least recently '
           'used connection on another listener will be closed in this case.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Most client connections at once (also per listener, '
                '<code>listener.name.&lt;l&gt;.max.connections</code>); more wait unserved, '
                'as behind Kafka\'s waiting acceptor, until one closes.'),
    _entry('max.connections.per.ip', BROKER, 'int', INT32_MAX, 'medium',
           ('The maximum number of connections we allow from each ip address. This can be set '
           'to 0 if there are overrides configured using max.connections.per.ip.overrides '
           'property. New connections from the ip address are dropped if the limit is '
           'reached.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Most connections from one address; more are closed when accepted.'),
    _entry('max.connections.per.ip.overrides', BROKER, 'string', '', 'medium',
           ('A comma-separated list of per-ip or hostname overrides to the default maximum '
           'number of connections. An example value is "hostName:100,127.0.0.1:200"'),
           dynamic=CLUSTER_WIDE,
           check=check_connection_overrides,
           note='Host names are resolved when the config is read.'),
    _entry('message.max.bytes', BROKER, 'int', 1048588, 'high',
           ('The largest record batch size allowed by Kafka (after compression if compression '
           'is enabled).This can be set per topic with the topic level '
           '<code>max.message.bytes</code> config.'),
           at_least=0,
           dynamic=CLUSTER_WIDE,
           note='Largest record batch.'),
    _entry('node.id', BROKER, 'int', NO_DEFAULT, 'high',
           ('The node ID associated with the roles this process is playing when '
           '<code>process.roles</code> is non-empty. This is required configuration when '
           'running in KRaft mode.'),
           note="The node id (KRaft's name for broker.id); unset: broker.id."),
    _entry('num.io.threads', BROKER, 'int', 8, 'high',
           ('The number of threads that the server uses for processing requests, which may '
           'include disk I/O'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           support=ACCEPTED,
           note='Accepted; handlers run on the event loop.'),
    _entry('num.network.threads', BROKER, 'int', 3, 'high',
           ('The number of threads that the server uses for receiving requests from the '
           'network and sending responses to the network. Noted: each listener (except for '
           'controller listener) creates its own thread pool.'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           support=ACCEPTED,
           note='Accepted; one event loop serves every connection.'),
    _entry('num.partitions', BROKER, 'int', 1, 'medium',
           ('The default number of log partitions per topic. This configuration affects the '
           'following paths:<ul>  <li>1. Auto topic creation</li>  <li>2. Internal streams '
           'topic creation</li>  <li>3. Topic creation via '
           '<code>AdminClient#createTopics</code> when the number of partition is set to '
           '-1</li></ul><p>For (1), the value from the broker configuration is used only when'
           ' it is explicitly set. If it is not explicitly configured on the broker, the '
           'value from the controller configuration is used.<br/>For (2) and (3), the value '
           'from the controller configuration is always used.</p>'),
           at_least=1,
           note='Partitions of an auto-created topic.'),
    _entry('num.recovery.threads.per.data.dir', BROKER, 'int', 2, 'high',
           ('The number of threads per data directory to be used for log recovery at startup '
           'and flushing at shutdown'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           support=ACCEPTED,
           note='Accepted; recovery is sequential.'),
    _entry('offset.metadata.max.bytes', BROKER, 'int', 4096, 'high',
           'The maximum size for a metadata entry associated with an offset commit.',
           note='Largest commit metadata string.'),
    _entry('offsets.commit.timeout.ms', BROKER, 'int', 5000, 'high',
           ('Offset commit will be delayed until all replicas for the offsets topic receive '
           'the commit or this timeout is reached. This is similar to the producer request '
           'timeout. This is applied to all the writes made by the coordinator.'),
           at_least=1,
           support=ACCEPTED,
           note='Accepted; commits are written at once.'),
    _entry('offsets.retention.check.interval.ms', BROKER, 'long', 600000, 'high',
           'Frequency at which to check for stale offsets',
           at_least=1,
           note='How often expired offsets are removed.'),
    _entry('offsets.retention.minutes', BROKER, 'int', 10080, 'high',
           ('For subscribed consumers, committed offset of a specific partition will be '
           'expired and discarded when 1) this retention period has elapsed after the '
           'consumer group loses all its consumers (i.e. becomes empty); 2) this retention '
           'period has elapsed since the last time an offset is committed for the partition '
           'and the group is no longer subscribed to the corresponding topic. For standalone '
           'consumers (using manual assignment), offsets will be expired after this retention'
           ' period has elapsed since the time of last commit. Note that when a group is '
           'deleted via the delete-group request, its committed offsets will also be deleted '
           'without extra retention period; also when a topic is deleted via the delete-topic'
           " request, upon propagated metadata update any group's committed offsets for that "
           'topic will also be deleted without extra retention period.'),
           at_least=1,
           note='Committed offsets of an empty group expire after this long.'),
    _entry('offsets.topic.num.partitions', BROKER, 'int', 50, 'high',
           ('The number of partitions for the offset commit topic (should not change after '
           'deployment).'),
           at_least=1,
           note='Partitions of __consumer_offsets.'),
    _entry('offsets.topic.replication.factor', BROKER, 'short', 3, 'high',
           ('The replication factor for the offsets topic (set higher to ensure availability).'
           ' Internal topic creation will fail until the cluster size meets this replication '
           'factor requirement.'),
           at_least=1,
           note=('In a cluster (zookeeper.connect): the replication factor of '
                 '__consumer_offsets, created on the first FindCoordinator for a group. A '
                 'lone broker keeps its internal topics at one replica.')),
    _entry('offsets.topic.segment.bytes', BROKER, 'int', 104857600, 'high',
           ('The offsets topic segment bytes should be kept relatively small in order to '
           'facilitate faster log compaction and cache loads.'),
           at_least=1,
           note=('In a cluster (zookeeper.connect): segment.bytes of __consumer_offsets when it is '
                 'created. A lone broker creates it with the default, 104857600.')),
    _entry('process.roles', BROKER, 'list', NO_DEFAULT, 'high',
           ("The roles that this process plays: 'broker', 'controller', or 'broker,controller'"
           ' if it is both. '),
           support=ACCEPTED,
           note='Accepted, unused (no KRaft quorum).'),
    _entry('producer.id.expiration.check.interval.ms', BROKER, 'int', 600000, 'low',
           ('The interval at which to remove producer IDs that have expired due to '
           '<code>producer.id.expiration.ms</code> passing.'),
           at_least=1,
           support=ACCEPTED,
           note=('Accepted; idle producer ids are dropped as their partitions are written and '
                'maintained.')),
    _entry('producer.id.expiration.ms', BROKER, 'int', 86400000, 'low',
           ('The time in ms that a topic partition leader will wait before expiring producer '
           'IDs. Producer IDs will not expire while a transaction associated to them is still'
           ' ongoing. Note that producer IDs may expire sooner if the last write from the '
           "producer ID is deleted due to the topic's retention settings. Setting this value "
           'the same or higher than <code>delivery.timeout.ms</code> can help prevent '
           'expiration during retries and protect against message duplication, but the '
           'default should be reasonable for most use cases.'),
           at_least=1,
           dynamic=CLUSTER_WIDE,
           note="An idle producer id's state is dropped after this long."),
    _entry('queued.max.requests', BROKER, 'int', 500, 'high',
           ('The number of queued requests allowed for data-plane, before blocking the network'
           ' threads'),
           at_least=1,
           note=('Requests read from one connection and not yet answered before the broker '
                'stops reading it (back-pressure).')),
    _entry('quota.window.num', BROKER, 'int', 11, 'low',
           'The number of samples to retain in memory for client quotas',
           at_least=1),
    _entry('quota.window.size.seconds', BROKER, 'int', 1, 'low',
           'The time span of each sample for client quotas',
           at_least=1),
    # Kafka's DynamicConfig.Broker (QuotaConfig.brokerQuotaConfigs): not in KafkaConfig's
    # ConfigDef, set per broker or as the cluster default only (DYNAMIC_ONLY below).
    _entry('leader.replication.throttled.rate', BROKER, 'long', INT64_MAX, 'medium',
           ('A long representing the upper bound (bytes/sec) on replication traffic for '
           'leaders enumerated in the property leader.replication.throttled.replicas (for each '
           'topic). This property can be only set dynamically. It is suggested that the limit '
           'be kept above 1MB/s for accurate behaviour.'),
           at_least=0, dynamic=CLUSTER_WIDE,
           note=("Bytes per second a leader sends to the throttled replicas of its topics that "
                 'are not in the ISR: past it they are left out of its Fetch answers '
                 '(seglog.cluster.replication_quota).')),
    _entry('follower.replication.throttled.rate', BROKER, 'long', INT64_MAX, 'medium',
           ('A long representing the upper bound (bytes/sec) on replication traffic for '
           'followers enumerated in the property follower.replication.throttled.replicas (for '
           'each topic). This property can be only set dynamically. It is suggested that the '
           'limit be kept above 1MB/s for accurate behaviour.'),
           at_least=0, dynamic=CLUSTER_WIDE,
           note=("Bytes per second a follower fetches for its throttled replicas that have not "
                 'caught up: past it they are left out of its Fetch requests '
                 '(seglog.cluster.replication_quota).')),
    _entry('replica.alter.log.dirs.io.max.bytes.per.second', BROKER, 'long', INT64_MAX,
           'medium',
           ('A long representing the upper bound (bytes/sec) on disk IO used for moving '
           'replica between log directories on the same broker. This property can be only set '
           'dynamically. It is suggested that the limit be kept above 1MB/s for accurate '
           'behaviour.'),
           at_least=0, dynamic=CLUSTER_WIDE, support=ACCEPTED,
           note=('No effect: a seglog broker has one log directory, so no replica moves '
                 'between directories (kafka-reassign-partitions --verify clears it).')),
    _entry('replica.fetch.backoff.ms', BROKER, 'int', 1000, 'medium',
           'The amount of time to sleep when fetch partition error occurs.',
           at_least=0,
           note='A follower waits this long after a failed fetch before the next.'),
    _entry('replica.fetch.max.bytes', BROKER, 'int', 1048576, 'medium',
           ('The number of bytes of messages to attempt to fetch for each partition. This is '
           'not an absolute maximum, if the first record batch in the first non-empty '
           'partition of the fetch is larger than this value, the record batch will still be '
           'returned to ensure that progress can be made. The maximum record batch size '
           'accepted by the broker is defined via <code>message.max.bytes</code> (broker '
           'config) or <code>max.message.bytes</code> (topic config).'),
           at_least=0,
           note='Bytes a follower fetches per partition (at least one batch).'),
    _entry('replica.fetch.min.bytes', BROKER, 'int', 1, 'high',
           ('Minimum bytes expected for each fetch response. If not enough bytes, wait up to '
           '<code>replica.fetch.wait.max.ms</code> (broker config). Even if the total data '
           'available in the broker exceeds replica.fetch.min.bytes, the actual returned size'
           ' may still be less than this value due to per-partition limits '
           'replica.fetch.max.bytes and max returned limits replica.fetch.response.max.bytes'),
           at_least=0,
           note="Bytes a follower's fetch waits for before its leader answers."),
    _entry('replica.fetch.response.max.bytes', BROKER, 'int', 10485760, 'medium',
           ('Maximum bytes expected for the entire fetch response. Records are fetched in '
           'batches, and if the first record batch in the first non-empty partition of the '
           'fetch is larger than this value, the record batch will still be returned to '
           'ensure that progress can be made. As such, this is not an absolute maximum. The '
           'maximum record batch size accepted by the broker is defined via '
           '<code>message.max.bytes</code> (broker config) or <code>max.message.bytes</code> '
           '(topic config).'),
           at_least=0,
           note='Bytes a follower fetches per request (at least one batch).'),
    _entry('replica.fetch.wait.max.ms', BROKER, 'int', 500, 'high',
           ('The maximum wait time for each fetcher request issued by follower replicas. This '
           'value should always be less than the replica.lag.time.max.ms at all times to '
           'prevent frequent shrinking of ISR for low throughput topics'),
           at_least=0,
           note="The longest a follower's fetch waits at its leader for records."),
    _entry('replica.high.watermark.checkpoint.interval.ms', BROKER, 'long', 5000, 'high',
           'The frequency with which the high watermark is saved out to disk',
           at_least=1,
           note='How often the high watermarks are written to replication-offset-checkpoint.'),
    _entry('replica.lag.time.max.ms', BROKER, 'long', 30000, 'high',
           ("If a follower hasn't sent any fetch requests or hasn't consumed up to the "
           "leader's log end offset for at least this time, the leader will remove the "
           'follower from ISR'),
           at_least=1,
           note=("A follower that has not caught up with its leader's log end for this long "
                'leaves the ISR (checked every half of it).')),
    _entry('replica.socket.timeout.ms', BROKER, 'int', 30000, 'high',
           ('The socket timeout for network requests. Its value should be at least '
           'replica.fetch.wait.max.ms'),
           at_least=1,
           note=("A follower's bound on connecting to its leader and on each request's round "
                'trip.')),
    _entry('share.coordinator.cold.partition.snapshot.interval.ms', BROKER, 'int', 300000, 'low',
           ('The duration in milliseconds that the share coordinator will wait between force '
           'snapshotting share partitions which are not being updated.'),
           at_least=1, internal=True,
           note=('A share-partition not snapshotted for this long gets a ShareSnapshot, so '
                 'that its older records can be pruned.')),
    _entry('share.coordinator.snapshot.update.records.per.snapshot', BROKER, 'int', 500,
           'medium',
           'The number of update records the share coordinator writes between snapshot records.',
           at_least=0, at_most=500,
           note=('A share-partition gets a ShareSnapshot record of its whole state after this '
                 'many ShareUpdate records.')),
    _entry('share.coordinator.state.topic.compression.codec', BROKER, 'int', 0, 'high',
           'Compression codec for the share-group state topic.',
           at_least=0, at_most=4,
           note=("Kafka's CompressionType id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of the "
                 "share coordinator's record batches.")),
    _entry('share.coordinator.state.topic.min.isr', BROKER, 'short', 2, 'high',
           'Overridden min.insync.replicas for the share-group state topic.',
           at_least=1,
           note='min.insync.replicas of __share_group_state when a cluster creates it.'),
    _entry('share.coordinator.state.topic.num.partitions', BROKER, 'int', 50, 'high',
           ('The number of partitions for the share-group state topic (should not change '
           'after deployment).'),
           at_least=1,
           note='Partitions of __share_group_state.'),
    _entry('share.coordinator.state.topic.prune.interval.ms', BROKER, 'int', 300000, 'low',
           ('The duration in milliseconds that the share coordinator will wait between pruning '
           'eligible records in share-group state topic.'),
           at_least=1, internal=True,
           note=('How often the records of __share_group_state that later snapshots made '
                 'redundant are deleted (its log start offset moves up).')),
    _entry('share.coordinator.state.topic.replication.factor', BROKER, 'short', 3, 'high',
           ('Replication factor for the share-group state topic. Topic creation will fail '
           'until the cluster size meets this replication factor requirement.'),
           at_least=1,
           note='Replicas of __share_group_state when a cluster creates it.'),
    _entry('share.coordinator.state.topic.segment.bytes', BROKER, 'int', 104857600, 'high',
           'The log segment size for the share-group state topic.',
           at_least=1,
           note='segment.bytes of __share_group_state when a cluster creates it.'),
    _entry('share.coordinator.write.timeout.ms', BROKER, 'int', 5000, 'high',
           ('The duration in milliseconds that the share coordinator will wait for all '
           'replicas of the share-group state topic to receive a write.'),
           at_least=1,
           note=('How long a share coordinator write waits for the ISR before '
                 'COORDINATOR_NOT_AVAILABLE.')),
    _entry('socket.listen.backlog.size', BROKER, 'int', 50, 'medium',
           ('The maximum number of pending connections on the socket. In Linux, you may also '
           'need to configure <code>somaxconn</code> and <code>tcp_max_syn_backlog</code> '
           'kernel parameters accordingly to make the configuration takes effect.'),
           at_least=1,
           note='The listen backlog.'),
    _entry('socket.receive.buffer.bytes', BROKER, 'int', 102400, 'high',
           ('The SO_RCVBUF buffer of the socket server sockets. If the value is -1, the OS '
           'default will be used.'),
           note=("SO_RCVBUF of connections, applied when set (unset or -1: the OS's autotuned "
                'size).')),
    _entry('socket.request.max.bytes', BROKER, 'int', 104857600, 'high',
           'The maximum number of bytes in a socket request',
           at_least=1,
           note='Largest request frame; a larger (or negative) size closes the connection.'),
    _entry('socket.send.buffer.bytes', BROKER, 'int', 102400, 'high',
           ('The SO_SNDBUF buffer of the socket server sockets. If the value is -1, the OS '
           'default will be used.'),
           note=("SO_SNDBUF of connections, applied when set (unset or -1: the OS's autotuned "
                'size).')),
    _entry('super.users', BROKER, 'string', '', 'medium',
           ('A semicolon-separated list of principals (<code>User:admin;User:ops</code>) '
           'that every ACL check allows (read by Kafka\'s StandardAuthorizer from the broker '
           "configs; not in the broker's ConfigDef)."),
           note="Read by seglog's ACL authorizer, as Kafka's StandardAuthorizer reads it."),
    _entry('ssl.client.auth', BROKER, 'string', 'none', 'medium',
           ('Configures kafka broker to request client authentication. The following settings '
           'are common:  <ul> <li><code>ssl.client.auth=required</code> If set to required '
           'client authentication is required. <li><code>ssl.client.auth=requested</code> '
           'This means client authentication is optional. unlike required, if this option is '
           'set client can choose not to provide authentication information about itself '
           '<li><code>ssl.client.auth=none</code> This means client authentication is not '
           'needed.</ul>'),
           dynamic=PER_BROKER,
           choices=('required', 'requested', 'none'),
           note=('Whether an SSL listener asks for a client certificate (required: the '
                'handshake fails without a trusted one).')),
    _entry('ssl.enabled.protocols', BROKER, 'list', ('TLSv1.2', 'TLSv1.3'), 'medium',
           ('The list of protocols enabled for SSL connections. The default is '
           "'TLSv1.2,TLSv1.3' when running with Java 11 or newer, 'TLSv1.2' otherwise. With "
           'the default value for Java 11, clients and servers will prefer TLSv1.3 if both '
           'support it and fallback to TLSv1.2 otherwise (assuming both support at least '
           'TLSv1.2). This default should be fine for most cases. Also see the config '
           'documentation for `ssl.protocol`.'),
           dynamic=PER_BROKER,
           note='TLSv1.2 and TLSv1.3; an older protocol is refused at start.'),
    _entry('ssl.endpoint.identification.algorithm', BROKER, 'string', 'https', 'low',
           ('The endpoint identification algorithm to validate server hostname using server '
           'certificate. '),
           dynamic=PER_BROKER,
           note=('https: a broker connecting to another over TLS (inter-broker listener) '
                'checks the host name in its certificate; empty: it does not.')),
    _entry('ssl.key.password', BROKER, 'password', None, 'medium',
           ("The password of the private key in the key store file or the PEM key specified in "
           "'ssl.keystore.key'."),
           dynamic=PER_BROKER,
           note='Decrypts an encrypted PEM key.'),
    _entry('ssl.keystore.certificate.chain', BROKER, 'password', None, 'medium',
           ("Certificate chain in the format specified by 'ssl.keystore.type'. Default SSL "
           'engine factory supports only PEM format with a list of X.509 certificates'),
           dynamic=PER_BROKER,
           note='PEM text of the certificate chain (with ssl.keystore.key).'),
    _entry('ssl.keystore.key', BROKER, 'password', None, 'medium',
           ("Private key in the format specified by 'ssl.keystore.type'. Default SSL engine "
           'factory supports only PEM format with PKCS#8 keys. If the key is encrypted, key '
           "password must be specified using 'ssl.key.password'"),
           dynamic=PER_BROKER,
           note='PEM text of the private key (with ssl.keystore.certificate.chain).'),
    _entry('ssl.keystore.location', BROKER, 'string', None, 'medium',
           ('The location of the key store file. This is optional for client and can be used '
           'for two-way authentication for client.'),
           dynamic=PER_BROKER,
           note='A PEM file holding the private key and its certificate chain.'),
    _entry('ssl.keystore.password', BROKER, 'password', None, 'medium',
           ("The store password for the key store file. This is optional for client and only "
           "needed if 'ssl.keystore.location' is configured. Key store password is not "
           'supported for PEM format.'),
           dynamic=PER_BROKER,
           note='Refused with a PEM keystore, as Kafka refuses it (the key has ssl.key.password).'),
    _entry('ssl.keystore.type', BROKER, 'string', 'JKS', 'medium',
           ('The file format of the key store file. This is optional for client. The values '
           'currently supported by the default `ssl.engine.factory.class` are [JKS, PKCS12, '
           'PEM].'),
           dynamic=PER_BROKER,
           note='PEM only: JKS and PKCS12 are refused by name (convert them with openssl).'),
    _entry('ssl.principal.mapping.rules', BROKER, 'string', 'DEFAULT', 'low',
           ('A list of rules for mapping from distinguished name from the client certificate to '
           'short name. The rules are evaluated in order and the first rule that matches a '
           'principal name is used to map it to a short name. Any later rules in the list are'
           ' ignored. By default, distinguished name of the X.500 certificate will be the '
           'principal. For more details on the format please see <a '
           'href="#security_authz"> security authorization and acls</a>. Note that this '
           'configuration is ignored if an extension of KafkaPrincipalBuilder is provided by '
           'the <code>principal.builder.class</code> configuration.'),
           dynamic=READ_ONLY,
           note=("Kafka's SslPrincipalMapper rules (RULE:pattern/replacement/[LU], DEFAULT) "
                'over the RFC 2253 subject of a client certificate.')),
    _entry('ssl.protocol', BROKER, 'string', 'TLSv1.3', 'medium',
           ('The SSL protocol used to generate the SSLContext. The default is '
           "'TLSv1.3' when running with Java 11 or newer, 'TLSv1.2' otherwise. This value "
           "should be fine for most use cases. Allowed values in recent JVMs are 'TLSv1.2' and "
           "'TLSv1.3'. 'TLS', 'TLSv1.1', 'SSL', 'SSLv2' and 'SSLv3' may be supported in older "
           'JVMs, but their usage is discouraged due to known security vulnerabilities. With '
           "the default value for this config and 'ssl.enabled.protocols', clients will "
           "downgrade to 'TLSv1.2' if the server does not support 'TLSv1.3'. If this config is "
           "set to 'TLSv1.2', clients will not use 'TLSv1.3' even if it is one of the values "
           'in ssl.enabled.protocols and the server only supports \'TLSv1.3\'.'),
           dynamic=PER_BROKER,
           note='TLSv1.3, TLSv1.2 (TLSv1.3 then not used) or TLS; older ones are refused.'),
    _entry('ssl.truststore.certificates', BROKER, 'password', None, 'medium',
           ("Trusted certificates in the format specified by 'ssl.truststore.type'. Default "
           'SSL engine factory supports only PEM format with X.509 certificates.'),
           dynamic=PER_BROKER,
           note='PEM text of the trusted certificates.'),
    _entry('ssl.truststore.location', BROKER, 'string', None, 'medium',
           'The location of the trust store file.',
           dynamic=PER_BROKER,
           note='A PEM file of trusted (CA) certificates.'),
    _entry('ssl.truststore.password', BROKER, 'password', None, 'medium',
           ('The password for the trust store file. If a password is not set, trust store file '
           'configured will still be used, but integrity checking is disabled. Trust store '
           'password is not supported for PEM format.'),
           dynamic=PER_BROKER,
           note='Refused with a PEM truststore, as Kafka refuses it.'),
    _entry('ssl.truststore.type', BROKER, 'string', 'JKS', 'medium',
           ('The file format of the trust store file. The values currently supported by the '
           'default `ssl.engine.factory.class` are [JKS, PKCS12, PEM].'),
           dynamic=PER_BROKER,
           note='PEM only: JKS and PKCS12 are refused by name.'),
    _entry('transaction.abort.timed.out.transaction.cleanup.interval.ms', BROKER, 'int',
           10000, 'low',
           'The interval at which to rollback transactions that have timed out',
           at_least=1,
           note='How often transactions past their timeout are aborted.'),
    _entry('transaction.max.timeout.ms', BROKER, 'int', 900000, 'high',
           ('The maximum allowed timeout for transactions. If a client’s requested transaction'
           ' time exceed this, then the broker will return an error in InitProducerIdRequest.'
           ' This prevents a client from too large of a timeout, which can stall consumers '
           'reading from topics included in the transaction.'),
           at_least=1,
           note='Largest transaction timeout a producer may ask for.'),
    _entry('transaction.partition.verification.enable', BROKER, 'boolean', True, 'low',
           'Enable verification that checks that the partition has been added to the '
           'transaction before writing transactional records to the partition',
           dynamic=CLUSTER_WIDE,
           note='A partition leader asks the transaction coordinator before the first '
                'transactional batch of a producer in a partition (KIP-890 part 1); a '
                'transaction.version 2 producer\'s partitions are added then whatever this '
                'says (part 2).'),
    _entry('transaction.remove.expired.transaction.cleanup.interval.ms', BROKER, 'int',
           3600000, 'low',
           ('The interval at which to remove transactions that have expired due to '
           '<code>transactional.id.expiration.ms</code> passing'),
           at_least=1,
           support=ACCEPTED,
           note='How often expired transactional ids are removed.'),
    _entry('transaction.state.log.min.isr', BROKER, 'int', 2, 'high',
           ('The minimum number of replicas that must acknowledge a write to transaction topic'
           ' in order to be considered successful.'),
           at_least=1,
           note=('In a cluster (zookeeper.connect): min.insync.replicas of '
                 '__transaction_state. A lone broker has one replica.')),
    _entry('transaction.state.log.num.partitions', BROKER, 'int', 50, 'high',
           ('The number of partitions for the transaction topic (should not change after '
           'deployment).'),
           at_least=1,
           note='Partitions of __transaction_state.'),
    _entry('transaction.state.log.replication.factor', BROKER, 'short', 3, 'high',
           ('The replication factor for the transaction topic (set higher to ensure '
           'availability). Internal topic creation will fail until the cluster size meets '
           'this replication factor requirement.'),
           at_least=1,
           note=('In a cluster (zookeeper.connect): the replication factor of '
                 '__transaction_state, created on the first FindCoordinator for a '
                 'transactional id. A lone broker keeps its internal topics at one replica.')),
    _entry('transaction.state.log.segment.bytes', BROKER, 'int', 104857600, 'high',
           ('The transaction topic segment bytes should be kept relatively small in order to '
           'facilitate faster log compaction and cache loads'),
           at_least=1,
           note=('In a cluster (zookeeper.connect): segment.bytes of __transaction_state when it is '
                 'created. A lone broker creates it with the default, 104857600.')),
    _entry('transactional.id.expiration.ms', BROKER, 'int', 604800000, 'high',
           ('The time in ms that the transaction coordinator will wait without receiving any '
           'transaction status updates for the current transaction before expiring its '
           'transactional id. Transactional IDs will not expire while a the transaction is '
           'still ongoing.'),
           at_least=1,
           note='A transactional id idle this long is forgotten.'),
    _entry('zookeeper.connect', BROKER, 'string', None, 'high',
           ("ZooKeeper's `host:port[,host:port...][/chroot]`: when set the broker is a member of"
           ' the cluster kept there (docs/cluster.md); null: a single-node broker.'),
           kafka=False),
    _entry('zookeeper.connection.timeout.ms', BROKER, 'int', None, 'high',
           ('How long the broker waits to connect to ZooKeeper at start (null: '
           'zookeeper.session.timeout.ms).'),
           at_least=1,
           kafka=False),
    _entry('zookeeper.session.timeout.ms', BROKER, 'int', 18000, 'high',
           'The ZooKeeper session timeout: a broker silent this long is dead to the cluster.',
           at_least=1,
           kafka=False),
    # --- Kafka 4.4's other broker configs: seglog does not implement them (refused by name)
    _entry('add.partitions.to.txn.retry.backoff.max.ms', BROKER, 'int', 100, 'high',
           ('The maximum allowed timeout for adding partitions to transactions on the server '
            'side. It only applies to the actual add partition operations, not the '
            'verification. It will not be effective if it is larger than request.timeout.ms'),
           at_least=0,
           note='How long a partition leader keeps asking the coordinator to add a partition '
                '(Produce v12+) while the previous transaction completes.'),
    _entry('add.partitions.to.txn.retry.backoff.ms', BROKER, 'int', 20, 'high',
           'The server-side retry backoff when the server attempts to add the partition to '
           'the transaction',
           at_least=1,
           note='The pause between those asks.'),
    _absent('alter.config.policy.class.name', 'class', None, 'low', READ_ONLY),
    _absent('alter.log.dirs.replication.quota.window.num', 'int', 11, 'low', READ_ONLY),
    _absent('alter.log.dirs.replication.quota.window.size.seconds', 'int', 1, 'low', READ_ONLY),
    _absent('background.threads', 'int', 10, 'high', CLUSTER_WIDE),
    _absent('broker.heartbeat.interval.ms', 'int', 2000, 'medium', READ_ONLY),
    _absent('broker.rack', 'string', None, 'medium', READ_ONLY),
    _absent('broker.session.timeout.ms', 'int', 9000, 'medium', READ_ONLY),
    _absent('client.quota.callback.class', 'class', None, 'low', READ_ONLY),
    _absent('config.providers', 'list', (), 'low', CLUSTER_WIDE),
    _entry('connection.failed.authentication.delay.ms', BROKER, 'int', 100, 'low',
           ('Connection close delay on failed authentication: this is the time (in '
           'milliseconds) by which connection close will be delayed on authentication failure.'
           ' This must be configured to be less than connections.max.idle.ms to prevent '
           'connection timeout.'),
           at_least=0,
           note=('A failed SASL login is answered (SASL_AUTHENTICATION_FAILED) and closed after '
                'this delay, the same for an unknown user and a wrong password.')),
    _entry('connections.max.reauth.ms', BROKER, 'long', 0, 'medium',
           ('When explicitly set to a positive number (the default is 0, not a positive '
           'number), a session lifetime that will not exceed the configured value will be '
           'communicated to v2.2.0 or later clients when they authenticate. The broker will '
           'disconnect any such connection that is not re-authenticated within the session '
           'lifetime and that is then subsequently used for any purpose other than '
           're-authentication. Configuration names can optionally be prefixed with listener '
           'prefix and SASL mechanism name in lower-case. For example, '
           'listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=3600000'),
           note=('SASL re-authentication (KIP-368): the session lifetime SaslAuthenticate v1+ '
                'answers; a request after it closes the connection.')),
    _absent('controlled.shutdown.enable', 'boolean', True, 'medium', READ_ONLY),
    _absent('controller.performance.always.log.threshold.ms', 'long', 2000, 'medium', READ_ONLY),
    _absent('controller.performance.sample.period.ms', 'long', 60000, 'medium', READ_ONLY),
    _absent('controller.quorum.append.linger.ms', 'int', 25, 'medium', READ_ONLY),
    _absent('controller.quorum.auto.join.enable', 'boolean', False, 'low', READ_ONLY),
    _absent('controller.quorum.election.backoff.max.ms', 'int', 1000, 'high', READ_ONLY),
    _absent('controller.quorum.election.timeout.ms', 'int', 1000, 'high', READ_ONLY),
    _absent('controller.quorum.fetch.max.bytes', 'int', 1048576, 'low', READ_ONLY),
    _absent('controller.quorum.fetch.snapshot.max.bytes', 'int', 1048576, 'low', READ_ONLY),
    _absent('controller.quorum.fetch.timeout.ms', 'int', 2000, 'high', READ_ONLY),
    _absent('controller.quorum.request.timeout.ms', 'int', 2000, 'medium', READ_ONLY),
    _absent('controller.quorum.retry.backoff.ms', 'int', 20, 'low', READ_ONLY),
    _absent('controller.quota.window.num', 'int', 11, 'low', READ_ONLY),
    _absent('controller.quota.window.size.seconds', 'int', 1, 'low', READ_ONLY),
    _absent('controller.socket.timeout.ms', 'int', 30000, 'medium', READ_ONLY),
    _absent('cordoned.log.dirs', 'list', (), 'medium', PER_BROKER),
    _absent('create.topic.policy.class.name', 'class', None, 'low', READ_ONLY),
    _entry('delegation.token.expiry.check.interval.ms', BROKER, 'long', 3600000, 'low',
           'Scan interval to remove expired delegation tokens.',
           at_least=1,
           note='Expired tokens are removed at the first token use after this interval.'),
    _entry('delegation.token.expiry.time.ms', BROKER, 'long', 86400000, 'medium',
           ('The token validity time in milliseconds before the token needs to be renewed. '
           'Default value 1 day.'),
           at_least=1,
           note='A new or renewed token expires this long after (at most its max time).'),
    _entry('delegation.token.max.lifetime.ms', BROKER, 'long', 604800000, 'medium',
           ('The token has a maximum lifetime beyond which it cannot be renewed anymore. '
           'Default value 7 days.'),
           at_least=1,
           note="A token's max time (a CreateDelegationToken may ask for less)."),
    _entry('delegation.token.secret.key', BROKER, 'password', None, 'medium',
           ('Secret key to generate and verify delegation tokens. The same key must be '
           'configured across all the brokers.  If using Kafka with KRaft, the key must also '
           'be set across all controllers.  If the key is not set or set to empty string, '
           'brokers will disable the delegation token support.'),
           note=('Delegation tokens (KIP-48): the HMAC-SHA512 key of every token; unset, the '
                 'token APIs answer DELEGATION_TOKEN_AUTH_DISABLED.')),
    _absent('delete.records.purgatory.purge.interval.requests', 'int', 1, 'medium', READ_ONLY),
    _absent('early.start.listeners', 'list', None, 'high', READ_ONLY),
    _entry('errors.deadletterqueue.auto.create.topics.enable', BROKER, 'boolean', False,
           'medium',
           ('Whether automatic creation of DLQ topics is enabled (KIP-1191). When a share '
           'group has a DLQ topic configured, this setting controls whether the broker will '
           'automatically create the topic if it does not exist.'),
           dynamic=CLUSTER_WIDE,
           note=('A missing DLQ topic is created with num.partitions, '
                 'default.replication.factor, errors.deadletterqueue.group.enable=true and '
                 'message.timestamp.type=CreateTime (seglog.server.share_dlq).')),
    _entry('errors.deadletterqueue.topic.name.prefix', BROKER, 'string', 'dlq.', 'medium',
           ('The required prefix of topic names used by dead-letter queue topics for share '
           'groups. When set to "", there is no restriction on the names used for '
           'dead-letter queue topics.'),
           dynamic=CLUSTER_WIDE,
           note='A DLQ write to a topic without the prefix is refused (the records archived).'),
    _absent('fetch.purgatory.purge.interval.requests', 'int', 1000, 'medium', READ_ONLY),
    _absent('follower.fetch.last.tiered.offset.enable', 'boolean', False, 'medium', CLUSTER_WIDE),
    _absent('group.consumer.assignment.interval.ms', 'int', 1000, 'medium', CLUSTER_WIDE),
    _absent('group.consumer.assignor.offload.enable', 'boolean', True, 'medium', CLUSTER_WIDE),
    _entry('group.consumer.assignors', BROKER, 'list', ('uniform', 'range'), 'medium',
           'The server side assignors as a list of either names for builtin assignors or full class names for customer assignors. The first one in the list is considered as the default assignor to be used in the case where the consumer does not specify an assignor. Changing the default assignor does not trigger a rebalance for existing groups; the new default takes effect on the next rebalance. The supported builtin assignors are: uniform, range.',
           choices=('uniform', 'range'),
           note='The built-in assignors only (no class names).'),
    _entry('group.consumer.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           'The heartbeat interval given to the members of a consumer group.',
           at_least=1),
    _absent('group.consumer.max.assignment.interval.ms', 'int', 15000, 'medium', READ_ONLY),
    _entry('group.consumer.max.heartbeat.interval.ms', BROKER, 'int', 15000, 'medium',
           'The maximum heartbeat interval for registered consumers.',
           at_least=1),
    _entry('group.consumer.max.session.timeout.ms', BROKER, 'int', 60000, 'medium',
           'The maximum allowed session timeout for registered consumers.',
           at_least=1),
    _entry('group.consumer.max.size', BROKER, 'int', INT32_MAX, 'medium',
           'The maximum number of consumers that a single consumer group can accommodate. This value will only impact groups under the CONSUMER group protocol. To configure the max group size when using the CLASSIC group protocol use group.max.size instead.',
           at_least=1),
    _entry('group.consumer.migration.policy', BROKER, 'string', 'bidirectional', 'medium',
           'The config that enables converting the non-empty classic group using the consumer embedded protocol to the non-empty consumer group using the consumer group protocol and vice versa; conversions of empty groups in both directions are always enabled regardless of this policy. bidirectional: both upgrade from classic group to consumer group and downgrade from consumer group to classic group are enabled, upgrade: only upgrade from classic group to consumer group is enabled, downgrade: only downgrade from consumer group to classic group is enabled, disabled: neither upgrade nor downgrade is enabled.',
           choices=('disabled', 'upgrade', 'downgrade', 'bidirectional'),
           note='Values in lower case only (Kafka also accepts other cases).'),
    _absent('group.consumer.min.assignment.interval.ms', 'int', 0, 'medium', READ_ONLY),
    _entry('group.consumer.min.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           'The minimum heartbeat interval for registered consumers.',
           at_least=1),
    _entry('group.consumer.min.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           'The minimum allowed session timeout for registered consumers.',
           at_least=1),
    _absent('group.consumer.regex.refresh.interval.ms', 'int', 600000, 'medium', READ_ONLY),
    _entry('group.consumer.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           'The timeout to detect client failures when using the consumer group protocol.',
           at_least=1),
    _absent('group.coordinator.append.linger.ms', 'int', -1, 'medium', READ_ONLY),
    _absent('group.coordinator.background.threads', 'int', 2, 'high', READ_ONLY),
    _absent('group.coordinator.cached.buffer.max.bytes', 'int', 1048588, 'medium', CLUSTER_WIDE),
    _absent('group.coordinator.threads', 'int', 4, 'high', READ_ONLY),
    _entry('group.share.assignment.interval.ms', BROKER, 'int', 1000, 'medium',
           'The interval between assignment updates for a share group.', at_least=0,
           dynamic=CLUSTER_WIDE,
           note='A share group recomputes its target assignment at most this often.'),
    _absent('group.share.assignor.offload.enable', 'boolean', True, 'medium', CLUSTER_WIDE),
    _entry('group.share.assignors', BROKER, 'list', ('simple',), 'medium',
           'The server-side assignors as a list of either names for built-in assignors or full class names for custom assignors. The list must contain only a single entry which is used by all groups. The supported built-in assignors are: simple.',
           choices=('simple',),
           note='The built-in simple assignor only (no class names).'),
    _entry('group.share.delivery.count.limit', BROKER, 'int', 5, 'medium',
           'The maximum number of delivery attempts for a record delivered to a share group.',
           at_least=2, at_most=10, note='Read by the share partitions (ShareFetch) and as the bound of the group-level config.'),
    _absent('group.share.dlq.manager.class.name',
            'string',
            'org.apache.kafka.server.share.dlq.DefaultShareGroupDLQManager', 'medium', READ_ONLY),
    _entry('group.share.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           'The heartbeat interval given to the members of a share group.', at_least=1,
           note='Told to share group members in ShareGroupHeartbeat.'),
    _entry('group.share.initialize.retry.interval.ms', BROKER, 'int', 30000, 'low',
           'Time elapsed before retrying initialize share group state request. If below offsets.commit.timeout.ms, then value of offsets.commit.timeout.ms is used.',
           at_least=1, internal=True),
    _entry('group.share.max.assignment.interval.ms', BROKER, 'int', 15000, 'medium',
           'The maximum interval between assignment updates for a share group.', at_least=0,
           note='Upper bound of share.assignment.interval.ms.'),
    _entry('group.share.max.delivery.count.limit', BROKER, 'int', 10, 'medium',
           'The maximum value of a group configuration for the maximum number of delivery attempts for a record delivered to a share group.',
           at_least=5, at_most=25, note='Upper bound of share.delivery.count.limit.'),
    _entry('group.share.max.heartbeat.interval.ms', BROKER, 'int', 15000, 'medium',
           'The maximum heartbeat interval for share group members.', at_least=1,
           note='Upper bound of group.share.heartbeat.interval.ms.'),
    _entry('group.share.max.partition.max.record.locks', BROKER, 'int', 4000, 'medium',
           'The maximum value of a group configuration for the record lock limit per share-partition.',
           at_least=2000, at_most=10000,
           note='Upper bound of share.partition.max.record.locks.'),
    _entry('group.share.max.record.lock.duration.ms', BROKER, 'int', 60000, 'medium',
           'The maximum value of a group configuration for record acquisition lock duration in milliseconds.',
           at_least=30000, at_most=3600000,
           note='Upper bound of share.record.lock.duration.ms.'),
    _entry('group.share.max.session.timeout.ms', BROKER, 'int', 60000, 'medium',
           'The maximum allowed session timeout for share group members.', at_least=1,
           note='Upper bound of group.share.session.timeout.ms.'),
    _entry('group.share.max.share.sessions', BROKER, 'int', 2000, 'medium',
           'The maximum number of share sessions per broker.', at_least=1,
           note='Read by the share session cache (ShareFetch).'),
    _entry('group.share.max.size', BROKER, 'int', 200, 'medium',
           'The maximum number of members that a single share group can accommodate.',
           at_least=1, at_most=1000, note='Members beyond it get GROUP_MAX_SIZE_REACHED.'),
    _entry('group.share.min.assignment.interval.ms', BROKER, 'int', 0, 'medium',
           'The minimum interval between assignment updates for a share group.', at_least=0,
           note='Lower bound of share.assignment.interval.ms.'),
    _entry('group.share.min.delivery.count.limit', BROKER, 'int', 2, 'medium',
           'The minimum value of a group configuration for the maximum number of delivery attempts for a record delivered to a share group.',
           at_least=2, at_most=5, note='Lower bound of share.delivery.count.limit.'),
    _entry('group.share.min.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           'The minimum heartbeat interval for share group members.', at_least=1,
           note='Lower bound of group.share.heartbeat.interval.ms.'),
    _entry('group.share.min.partition.max.record.locks', BROKER, 'int', 100, 'medium',
           'The minimum value of a group configuration for the record lock limit per share-partition.',
           at_least=100, at_most=2000,
           note='Lower bound of share.partition.max.record.locks.'),
    _entry('group.share.min.record.lock.duration.ms', BROKER, 'int', 15000, 'medium',
           'The minimum value of a group configuration for record acquisition lock duration in milliseconds.',
           at_least=1000, at_most=30000,
           note='Lower bound of share.record.lock.duration.ms.'),
    _entry('group.share.min.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           'The minimum allowed session timeout for share group members.', at_least=1,
           note='Lower bound of group.share.session.timeout.ms.'),
    _entry('group.share.partition.max.record.locks', BROKER, 'int', 2000, 'medium',
           'Share-group record lock limit per share-partition.', at_least=100, at_most=10000,
           note='Read by the share partitions (ShareFetch) and as the bound of the group-level config.'),
    _absent('group.share.persister.class.name',
            'string',
            'org.apache.kafka.server.share.persister.DefaultStatePersister', 'medium', READ_ONLY),
    _entry('group.share.record.lock.duration.ms', BROKER, 'int', 30000, 'medium',
           'The record acquisition lock duration in milliseconds for share groups.',
           at_least=1000, at_most=3600000, note='Read by the share partitions (ShareFetch) and as the bound of the group-level config.'),
    _entry('group.share.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           'The timeout to detect client failures when using the share group protocol.',
           at_least=1, note='A share group member silent this long is fenced.'),
    _entry('group.streams.acceptable.recovery.lag', BROKER, 'long', 10000, 'medium',
           ('The maximum amount of lag a warm-up task can have to be considered caught-up.'),
           at_least=0, internal=True,
           note='Told to streams group members in StreamsGroupHeartbeat (no warm-up tasks yet).'),
    _absent('group.streams.assignment.interval.ms', 'int', 1000, 'medium', CLUSTER_WIDE),
    _absent('group.streams.assignor.offload.enable', 'boolean', True, 'medium', CLUSTER_WIDE),
    _absent('group.streams.assignors', 'list', ('sticky',), 'medium', READ_ONLY),
    _entry('group.streams.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           'The heartbeat interval given to the members.', at_least=1,
           note='The interval told to streams group members.'),
    _absent('group.streams.initial.rebalance.delay.ms', 'int', 3000, 'medium', READ_ONLY),
    _absent('group.streams.max.assignment.interval.ms', 'int', 15000, 'medium', READ_ONLY),
    _entry('group.streams.max.heartbeat.interval.ms', BROKER, 'int', 15000, 'medium',
           ('The maximum allowed value for the group-level configuration of '
            'streams.heartbeat.interval.ms'), at_least=1,
           note='Upper bound of group.streams.heartbeat.interval.ms.'),
    _entry('group.streams.max.session.timeout.ms', BROKER, 'int', 60000, 'medium',
           ('The maximum allowed value for the group-level configuration of '
            'streams.session.timeout.ms'), at_least=1,
           note='Upper bound of group.streams.session.timeout.ms.'),
    _entry('group.streams.max.size', BROKER, 'int', INT32_MAX, 'medium',
           'The maximum number of streams clients that a single streams group can accommodate.',
           at_least=1, note='Members beyond it get GROUP_MAX_SIZE_REACHED.'),
    _entry('group.streams.max.standby.replicas', BROKER, 'int', 2, 'medium',
           ('The maximum allowed value for the group-level configuration of '
            'streams.num.standby.replicas'), at_least=0,
           note='Upper bound of group.streams.num.standby.replicas.'),
    _absent('group.streams.max.warmup.replicas', 'int', 20, 'medium', READ_ONLY),
    _absent('group.streams.min.assignment.interval.ms', 'int', 0, 'medium', READ_ONLY),
    _entry('group.streams.min.heartbeat.interval.ms', BROKER, 'int', 5000, 'medium',
           ('The minimum allowed value for the group-level configuration of '
            'streams.heartbeat.interval.ms'), at_least=1,
           note='Lower bound of group.streams.heartbeat.interval.ms.'),
    _entry('group.streams.min.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           ('The minimum allowed value for the group-level configuration of '
            'streams.session.timeout.ms'), at_least=1,
           note='Lower bound of group.streams.session.timeout.ms.'),
    _absent('group.streams.min.task.offset.interval.ms', 'int', 15000, 'medium', READ_ONLY),
    _entry('group.streams.num.standby.replicas', BROKER, 'int', 0, 'medium',
           'The number of standby replicas for each task.', at_least=0,
           note='Standby tasks per active task in the streams groups\' assignment.'),
    _absent('group.streams.num.warmup.replicas', 'int', 2, 'medium', READ_ONLY),
    _absent('group.streams.rack.aware.assignment.tags', 'list', (), 'low', READ_ONLY),
    _entry('group.streams.session.timeout.ms', BROKER, 'int', 45000, 'medium',
           'The timeout to detect client failures when using the streams group protocol.',
           at_least=1, note='A streams group member silent this long is removed.'),
    _entry('group.streams.task.offset.interval.ms', BROKER, 'int', 60000, 'medium',
           ('The interval in which the warmup task changelog offsets on a client are updated '
            'on the broker. The offsets are sent with the next heartbeat after this time has '
            'passed.'), at_least=1, internal=True,
           note='Told to streams group members in StreamsGroupHeartbeat.'),
    _absent('group.streams.topology.description.plugin.class', 'class', None, 'medium', READ_ONLY),
    _absent('initial.broker.registration.timeout.ms', 'int', 60000, 'medium', READ_ONLY),
    _absent('internal.metadata.delete.delay.millis', 'long', 60000, 'low', READ_ONLY),
    _absent('internal.metadata.log.segment.bytes', 'int', None, 'low', READ_ONLY),
    _absent('internal.metadata.max.batch.size.in.bytes', 'int', 8388608, 'low', READ_ONLY),
    _absent('kafka.metrics.polling.interval.secs', 'int', 10, 'low', READ_ONLY),
    _absent('kafka.metrics.reporters', 'list', (), 'low', READ_ONLY),
    _absent('log.cleaner.backoff.ms', 'long', 15000, 'medium', CLUSTER_WIDE),
    _absent('log.cleaner.io.buffer.load.factor', 'double', 0.9, 'medium', CLUSTER_WIDE),
    _absent('log.cleaner.io.buffer.size', 'int', 524288, 'medium', CLUSTER_WIDE),
    _absent('log.cleaner.io.max.bytes.per.second',
            'double', 1.7976931348623157e+308, 'medium', CLUSTER_WIDE),
    _absent('log.dir.failure.timeout.ms', 'long', 30000, 'low', READ_ONLY),
    _absent('log.flush.offset.checkpoint.interval.ms', 'int', 60000, 'high', READ_ONLY),
    _absent('log.flush.start.offset.checkpoint.interval.ms', 'int', 60000, 'high', READ_ONLY),
    _absent('log.initial.task.delay.ms', 'long', 30000, 'low', READ_ONLY),
    _absent('log.local.retention.bytes', 'long', -2, 'medium', CLUSTER_WIDE),
    _absent('log.local.retention.ms', 'long', -2, 'medium', CLUSTER_WIDE),
    _absent('log.remote.copy.lag.bytes', 'long', -1, 'medium', CLUSTER_WIDE),
    _absent('log.remote.copy.lag.ms', 'long', 0, 'medium', CLUSTER_WIDE),
    _absent('metadata.log.dir', 'string', None, 'high', READ_ONLY),
    _absent('metadata.log.max.record.bytes.between.snapshots', 'long', 20971520, 'high', READ_ONLY),
    _absent('metadata.log.max.snapshot.interval.ms', 'long', 3600000, 'high', READ_ONLY),
    _absent('metadata.log.segment.bytes', 'int', 1073741824, 'high', READ_ONLY),
    _absent('metadata.log.segment.ms', 'long', 604800000, 'high', READ_ONLY),
    _absent('metadata.max.idle.interval.ms', 'int', 500, 'low', READ_ONLY),
    _absent('metadata.max.retention.bytes', 'long', 104857600, 'high', READ_ONLY),
    _absent('metadata.max.retention.ms', 'long', 604800000, 'high', READ_ONLY),
    _absent('metric.reporters',
            'list', ('org.apache.kafka.common.metrics.JmxReporter',), 'low', CLUSTER_WIDE),
    _absent('metrics.num.samples', 'int', 2, 'low', READ_ONLY),
    _absent('metrics.recording.level', 'string', 'INFO', 'low', READ_ONLY),
    _absent('metrics.sample.window.ms', 'long', 30000, 'low', READ_ONLY),
    _absent('num.replica.alter.log.dirs.threads', 'int', None, 'high', READ_ONLY),
    _absent('num.replica.fetchers', 'int', 1, 'high', CLUSTER_WIDE),
    _absent('offsets.load.buffer.size', 'int', 5242880, 'high', READ_ONLY),
    _absent('offsets.topic.compression.codec', 'int', 0, 'high', READ_ONLY),
    _absent('principal.builder.class',
            'class',
            'org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder', 'medium', PER_BROKER),
    _absent('producer.purgatory.purge.interval.requests', 'int', 1000, 'medium', READ_ONLY),
    _absent('queued.max.request.bytes', 'long', -1, 'medium', READ_ONLY),
    _absent('remote.fetch.max.wait.ms', 'int', 500, 'medium', CLUSTER_WIDE),
    _absent('remote.list.offsets.request.timeout.ms', 'long', 30000, 'medium', CLUSTER_WIDE),
    _absent('remote.log.index.file.cache.total.size.bytes',
            'long', 1073741824, 'low', CLUSTER_WIDE),
    _absent('remote.log.index.file.cache.ttl.ms', 'long', 900000, 'low', READ_ONLY),
    _absent('remote.log.manager.copier.thread.pool.size', 'int', 10, 'medium', CLUSTER_WIDE),
    _absent('remote.log.manager.copy.max.bytes.per.second',
            'long', INT64_MAX, 'medium', CLUSTER_WIDE),
    _absent('remote.log.manager.copy.quota.window.num', 'int', 11, 'medium', READ_ONLY),
    _absent('remote.log.manager.copy.quota.window.size.seconds', 'int', 1, 'medium', READ_ONLY),
    _absent('remote.log.manager.expiration.thread.pool.size', 'int', 10, 'medium', CLUSTER_WIDE),
    _absent('remote.log.manager.fetch.max.bytes.per.second',
            'long', INT64_MAX, 'medium', CLUSTER_WIDE),
    _absent('remote.log.manager.fetch.quota.window.num', 'int', 11, 'medium', READ_ONLY),
    _absent('remote.log.manager.fetch.quota.window.size.seconds', 'int', 1, 'medium', READ_ONLY),
    _absent('remote.log.manager.follower.thread.pool.size', 'int', 2, 'medium', CLUSTER_WIDE),
    _absent('remote.log.manager.task.interval.ms', 'long', 30000, 'low', READ_ONLY),
    _absent('remote.log.manager.task.retry.backoff.max.ms', 'long', 30000, 'low', READ_ONLY),
    _absent('remote.log.manager.task.retry.backoff.ms', 'long', 500, 'low', READ_ONLY),
    _absent('remote.log.manager.task.retry.jitter', 'double', 0.2, 'low', READ_ONLY),
    _absent('remote.log.manager.thread.pool.size', 'int', 2, 'medium', READ_ONLY),
    _absent('remote.log.metadata.custom.metadata.max.bytes', 'int', 128, 'low', READ_ONLY),
    _absent('remote.log.metadata.manager.class.name',
            'string',
            'org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager', 'medium', READ_ONLY),
    _absent('remote.log.metadata.manager.class.path', 'string', None, 'medium', READ_ONLY),
    _absent('remote.log.metadata.manager.impl.prefix',
            'string', 'rlmm.config.', 'medium', READ_ONLY),
    _absent('remote.log.metadata.manager.listener.name', 'string', None, 'medium', READ_ONLY),
    _absent('remote.log.reader.max.pending.tasks', 'int', 100, 'medium', READ_ONLY),
    _absent('remote.log.reader.threads', 'int', 10, 'medium', CLUSTER_WIDE),
    _absent('remote.log.storage.manager.class.name', 'string', None, 'medium', READ_ONLY),
    _absent('remote.log.storage.manager.class.path', 'string', None, 'medium', READ_ONLY),
    _absent('remote.log.storage.manager.impl.prefix', 'string', 'rsm.config.', 'medium', READ_ONLY),
    _absent('remote.log.storage.system.enable', 'boolean', False, 'medium', READ_ONLY),
    _absent('replica.selector.class', 'string', None, 'medium', READ_ONLY),
    _absent('replica.socket.receive.buffer.bytes', 'int', 65536, 'high', READ_ONLY),
    _absent('replication.quota.window.num', 'int', 11, 'low', READ_ONLY),
    _absent('replication.quota.window.size.seconds', 'int', 1, 'low', READ_ONLY),
    _absent('request.timeout.ms', 'int', 30000, 'high', READ_ONLY),
    _absent('sasl.client.callback.handler.class', 'class', None, 'medium', READ_ONLY),
    _entry('sasl.enabled.mechanisms', BROKER, 'list', ('GSSAPI',), 'medium',
           ('The list of SASL mechanisms enabled in the Kafka server. The list may contain any '
           'mechanism for which a security provider is available. Only GSSAPI is enabled by '
           'default.'),
           dynamic=PER_BROKER,
           note=('PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are built; GSSAPI and OAUTHBEARER '
                'are refused by name at start when a SASL listener enables them. Read at '
                'start.')),
    _entry('sasl.jaas.config', BROKER, 'password', None, 'medium',
           ('JAAS login context parameters for SASL connections in the format used by JAAS '
           'configuration files. JAAS configuration file format is described <a '
           'href="https://docs.oracle.com/javase/8/docs/technotes/guides/security/jgss/'
           'tutorials/LoginConfigFile.html">here</a>. The format for the value is: '
           '<code>loginModuleClass controlFlag (optionName=optionValue)*;</code>. For brokers, '
           'the config must be prefixed with listener prefix and SASL mechanism name in '
           'lower-case. For example, '
           'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=com.example.ScramLoginModule'
           ' required;'),
           dynamic=PER_BROKER,
           note=("Read from listener.name.<listener>.<mechanism>.sasl.jaas.config: PLAIN's "
                 'PlainLoginModule gives the users (user_<name>="<password>") and, with '
                 "username/password, the broker's own inter-broker login; ScramLoginModule "
                 "gives the broker's own login only. Read at start.")),
    _absent('sasl.kerberos.kinit.cmd', 'string', '/usr/bin/kinit', 'medium', PER_BROKER),
    _absent('sasl.kerberos.min.time.before.relogin', 'long', 60000, 'medium', PER_BROKER),
    _absent('sasl.kerberos.principal.to.local.rules', 'list', ('DEFAULT',), 'medium', PER_BROKER),
    _absent('sasl.kerberos.service.name', 'string', None, 'medium', PER_BROKER),
    _absent('sasl.kerberos.ticket.renew.jitter', 'double', 0.05, 'medium', PER_BROKER),
    _absent('sasl.kerberos.ticket.renew.window.factor', 'double', 0.8, 'medium', PER_BROKER),
    _absent('sasl.login.callback.handler.class', 'class', None, 'medium', READ_ONLY),
    _absent('sasl.login.class', 'class', None, 'medium', READ_ONLY),
    _absent('sasl.login.connect.timeout.ms', 'int', None, 'low', READ_ONLY),
    _absent('sasl.login.read.timeout.ms', 'int', None, 'low', READ_ONLY),
    _absent('sasl.login.refresh.buffer.seconds', 'short', 300, 'medium', PER_BROKER),
    _absent('sasl.login.refresh.min.period.seconds', 'short', 60, 'medium', PER_BROKER),
    _absent('sasl.login.refresh.window.factor', 'double', 0.8, 'medium', PER_BROKER),
    _absent('sasl.login.refresh.window.jitter', 'double', 0.05, 'medium', PER_BROKER),
    _absent('sasl.login.retry.backoff.max.ms', 'long', 10000, 'low', READ_ONLY),
    _absent('sasl.login.retry.backoff.ms', 'long', 100, 'low', READ_ONLY),
    _absent('sasl.mechanism.controller.protocol', 'string', 'GSSAPI', 'high', READ_ONLY),
    _entry('sasl.mechanism.inter.broker.protocol', BROKER, 'string', 'GSSAPI', 'medium',
           'SASL mechanism used for inter-broker communication. Default is GSSAPI.',
           dynamic=PER_BROKER,
           note=('The mechanism a broker logs in with on a SASL inter-broker listener (PLAIN or '
                'SCRAM-SHA-*). Read at start.')),
    _absent('sasl.oauthbearer.allow.unverified.audience', 'boolean', False, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.allow.unverified.issuer', 'boolean', False, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.algorithm', 'string', 'RS256', 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.aud', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.exp.seconds', 'int', 300, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.iss', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.jti.include', 'boolean', False, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.nbf.seconds', 'int', 60, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.claim.sub', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.file', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.private.key.file', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.private.key.passphrase',
            'password', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.assertion.template.file', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.client.credentials.client.id', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.client.credentials.client.secret',
            'password', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.clock.skew.seconds', 'int', 30, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.expected.audience', 'list', (), 'high', READ_ONLY),
    _absent('sasl.oauthbearer.expected.issuer', 'string', None, 'high', READ_ONLY),
    _absent('sasl.oauthbearer.jwks.endpoint.refresh.ms', 'long', 3600000, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms', 'long', 10000, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.jwks.endpoint.retry.backoff.ms', 'long', 100, 'low', READ_ONLY),
    _absent('sasl.oauthbearer.jwks.endpoint.url', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.jwt.retriever.class',
            'class',
            'org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever', 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.jwt.validator.class',
            'class',
            'org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator', 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.scope', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.oauthbearer.scope.claim.name', 'string', 'scope', 'low', READ_ONLY),
    _absent('sasl.oauthbearer.sub.claim.name', 'string', 'sub', 'low', READ_ONLY),
    _absent('sasl.oauthbearer.token.endpoint.url', 'string', None, 'medium', READ_ONLY),
    _absent('sasl.server.callback.handler.class', 'class', None, 'medium', READ_ONLY),
    _entry('sasl.server.max.receive.size', BROKER, 'int', 524288, 'medium',
           ('The maximum receive size allowed before and during initial SASL authentication. '
           'Default receive size is 512KB. GSSAPI limits requests to 64K, but we allow upto '
           '512KB by default for custom SASL mechanisms. In practice, PLAIN, SCRAM and OAUTH '
           'mechanisms can use much smaller limits.'),
           note=('A larger request frame before authentication closes the connection.')),
    _absent('security.inter.broker.protocol', 'string', 'PLAINTEXT', 'medium', READ_ONLY),
    _absent('security.providers', 'string', None, 'low', READ_ONLY),
    _absent('server.max.startup.time.ms', 'long', INT64_MAX, 'medium', READ_ONLY),
    _absent('share.coordinator.append.linger.ms', 'int', -1, 'medium', READ_ONLY),
    _absent('share.coordinator.cached.buffer.max.bytes', 'int', 1048588, 'medium', CLUSTER_WIDE),
    _absent('share.coordinator.load.buffer.size', 'int', 5242880, 'high', READ_ONLY),
    _absent('share.coordinator.threads', 'int', 1, 'medium', READ_ONLY),
    _absent('share.fetch.purgatory.purge.interval.requests', 'int', 1000, 'medium', READ_ONLY),
    _absent('socket.connection.setup.timeout.max.ms', 'long', 30000, 'medium', READ_ONLY),
    _absent('socket.connection.setup.timeout.ms', 'long', 10000, 'medium', READ_ONLY),
    _absent('ssl.allow.dn.changes', 'boolean', False, 'low', READ_ONLY),
    _absent('ssl.allow.san.changes', 'boolean', False, 'low', READ_ONLY),
    _absent('ssl.cipher.suites', 'list', (), 'medium', PER_BROKER),
    _absent('ssl.engine.factory.class', 'class', None, 'low', PER_BROKER),
    _absent('ssl.keymanager.algorithm', 'string', 'SunX509', 'medium', PER_BROKER),
    _absent('ssl.provider', 'string', None, 'medium', PER_BROKER),
    _absent('ssl.secure.random.implementation', 'string', None, 'low', PER_BROKER),
    _absent('ssl.trustmanager.algorithm', 'string', 'PKIX', 'medium', PER_BROKER),
    _absent('telemetry.max.bytes', 'int', 1048576, 'low', READ_ONLY),
    _absent('transaction.state.log.load.buffer.size', 'int', 5242880, 'high', READ_ONLY),
    _absent('transaction.two.phase.commit.enable', 'boolean', False, 'low', READ_ONLY),
    _absent('unclean.leader.election.interval.ms', 'long', 300000, 'medium', READ_ONLY),
    _absent('unstable.api.versions.enable', 'boolean', False, 'high', READ_ONLY),
    _absent('unstable.feature.versions.enable', 'boolean', False, 'high', READ_ONLY),

)

#: Topic configs by name (scope topic or both), implemented or not.
TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in CONFIGS if k.topic}
#: Broker configs by name (scope broker or both), implemented or not.
BROKER_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in CONFIGS if k.broker}

#: Kafka's dynamic-only broker configs (``DynamicConfig.Broker``): not in KafkaConfig's
#: ConfigDef, so Kafka's DescribeConfigs of a broker lists one only while it is set.
DYNAMIC_ONLY: frozenset[str] = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second"})

#: Configs of older Kafka versions that Kafka 4.0 removed, with why: named in the error.
REMOVED: dict[str, str] = {
    "message.format.version": "removed in Kafka 4.0; seglog writes RecordBatch v2 (magic 2) only",
    "message.timestamp.difference.max.ms": "removed in Kafka 4.0; use "
    "message.timestamp.before.max.ms and message.timestamp.after.max.ms",
    "message.downconversion.enable": "removed in Kafka 4.0; seglog never down-converts",
    "log.message.format.version": "removed in Kafka 4.0 (RecordBatch v2 only)",
    "inter.broker.protocol.version": "removed in Kafka 4.0",
    "log.message.timestamp.difference.max.ms": "removed in Kafka 4.0; use "
    "log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms",
    "log.message.downconversion.enable": "removed in Kafka 4.0",
}


def _check_table() -> None:
    # Programmer errors in the table itself, caught at import.
    for key in CONFIGS:
        assert key.name not in REMOVED, key.name
        for synonym in key.synonyms:
            assert synonym in BROKER_CONFIGS, (key.name, synonym)
        assert not (key.scope == TOPIC and key.dynamic != READ_ONLY), key.name
    assert len(TOPIC_CONFIGS) + len(BROKER_CONFIGS) == len(CONFIGS) + sum(
        k.scope == BOTH for k in CONFIGS), "a name appears twice"


_check_table()


#: Which broker configs DescribeConfigs lists on a broker, in words (``docs/configs.md`` says
#: it): every config seglog takes, with its value; and the refused configs of
#: :data:`DESCRIBED_AT_DEFAULT`, with Kafka 4.4's default and source DEFAULT_CONFIG.
DESCRIBE_RULE = (
    "DescribeConfigs on a broker (`kafka-configs --describe --all --entity-type brokers`) "
    "lists every broker config seglog takes, with its value, source and synonyms. It also "
    "lists, with Kafka's default and source DEFAULT_CONFIG, the refused configs whose Kafka "
    "default describes seglog truthfully: a feature Kafka has off by default that seglog "
    "does not have (no policy, quota callback, replica selector or SASL callback class; no "
    "metrics reporters or config providers; no rack; no cordoned log dirs; no tiered "
    "storage; no two-phase commit), or the behaviour seglog has by construction "
    "(`principal.builder.class`: Kafka's DefaultKafkaPrincipalBuilder rules; "
    "`security.inter.broker.protocol`: PLAINTEXT unless `inter.broker.listener.name` names "
    "another listener, as in Kafka). Setting any of them is still refused by name. The other "
    "refused configs are not listed: their defaults tune machinery seglog does not have "
    "(KRaft controllers and metadata log, share, streams and KIP-848 consumer groups, tiered "
    "storage, Java thread pools, buffers and purgatories, metrics sampling, quota windows, "
    "Kerberos and OAUTHBEARER, JSSE providers), so a value there would describe a broker "
    "that is not this one.")

#: The refused broker configs DescribeConfigs lists at Kafka's default (see
#: :data:`DESCRIBE_RULE`): each default is what seglog does.
DESCRIBED_AT_DEFAULT: frozenset[str] = frozenset({
    "alter.config.policy.class.name", "create.topic.policy.class.name",
    "client.quota.callback.class", "replica.selector.class",
    "sasl.server.callback.handler.class", "sasl.client.callback.handler.class",
    "sasl.login.class", "sasl.login.callback.handler.class", "ssl.engine.factory.class",
    "security.providers", "config.providers", "metric.reporters", "kafka.metrics.reporters",
    "broker.rack", "cordoned.log.dirs", "remote.log.storage.system.enable",
    "transaction.two.phase.commit.enable", "principal.builder.class",
    "security.inter.broker.protocol",
})
assert all(n in BROKER_CONFIGS and not BROKER_CONFIGS[n].implemented
           for n in DESCRIBED_AT_DEFAULT), "DESCRIBED_AT_DEFAULT names a config seglog takes"


#: Kafka's security configs (TLS, SASL, authorization, delegation tokens, per-listener
#: settings), by name prefix and by name, with the feature each belongs to. None is built yet
#: (issue 23): each is refused saying so, never taken and ignored, since a broker asked to
#: authenticate that served without it would be open to anyone.
SECURITY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("ssl.", "this TLS setting (seglog's TLS reads PEM stores with the ssl.* settings "
             "docs/configs.md lists)"),
    ("sasl.", "this SASL setting (seglog builds SASL PLAIN and SCRAM-SHA-256/512 only)"),
    ("listener.name.", "per-listener settings (listener.name.<listener>.*: TLS, SASL, limits)"),
    ("delegation.token.", "delegation tokens"),
)
#: See :data:`SECURITY_PREFIXES`: the security configs named whole.
SECURITY_NAMES: dict[str, str] = {
    "principal.builder.class": "authentication (principals)",
    "security.inter.broker.protocol": "security protocols other than PLAINTEXT",
    "security.providers": "this TLS setting (seglog's TLS is Python's ssl with OpenSSL)",
}


def security_feature(name: str) -> str | None:
    """The security feature broker config ``name`` belongs to (a TLS setting for ``ssl.*``,
    ...),
    or None when it is not one of Kafka's security configs."""
    feature = SECURITY_NAMES.get(name)
    if feature is not None:
        return feature
    for prefix, feature in SECURITY_PREFIXES:
        if name.startswith(prefix):
            return feature
    return None


def not_built(name: str, feature: str) -> InvalidConfigError:
    """The refusal of a Kafka security config whose ``feature`` seglog has not built yet."""
    return InvalidConfigError(
        f"Kafka broker config {name} is not implemented by seglog: {feature} is not built "
        "yet, so it cannot be set (seglog will not start a broker that would silently serve "
        "without it; docs/configs.md lists what seglog implements)")


def not_implemented(key: ConfigKey) -> InvalidConfigError:
    """The refusal of a Kafka config seglog does not implement, naming it (for a security
    config, naming the feature that is not built yet: :func:`security_feature`)."""
    feature = security_feature(key.name) if key.scope != TOPIC else None
    if feature is not None:
        return not_built(key.name, feature)
    level = "topic" if key.scope == TOPIC else "broker"
    return InvalidConfigError(
        f"Kafka {level} config {key.name} is not implemented by seglog, so it cannot be set "
        "(docs/configs.md lists what seglog implements)")


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_topic_config(name: Any, *, suggest: bool = True) -> InvalidConfigError:
    """The error for a name that is not a topic config: removed ones say why, broker configs
    and typos are Kafka's ``Unknown topic config name: <name>`` (with ``suggest``, the
    closest implemented topic config)."""
    if not isinstance(name, str):
        return InvalidConfigError(f"Configuration names are str, got {name!r}")
    if name in REMOVED:
        return InvalidConfigError(f"Unknown topic config name: {name} ({REMOVED[name]})")
    hint = _suggest(name, (k.name for k in TOPIC_CONFIGS.values() if k.implemented)) \
        if suggest else ""
    return InvalidConfigError(f"Unknown topic config name: {name}{hint}")


def unknown_broker_config(name: Any) -> InvalidConfigError:
    """The error for a name that is not a broker config (with the closest one seglog takes,
    or why Kafka removed it)."""
    if not isinstance(name, str):
        return InvalidConfigError(f"Broker config names are str, got {name!r}")
    if name in REMOVED:
        return InvalidConfigError(f"Unknown broker config {name!r}: {REMOVED[name]}")
    feature = security_feature(name)
    if feature is not None:
        # Not one of Kafka's broker ConfigDef names (super.users is the authorizer's,
        # listener.name.* are per-listener overrides), but a security setting all the same.
        return not_built(name, feature)
    hint = _suggest(name, (k.name for k in BROKER_CONFIGS.values() if k.implemented))
    return InvalidConfigError(f"Unknown broker config {name!r}{hint}")


def topic_key(name: Any, *, suggest: bool = True) -> ConfigKey:
    """The implemented topic config ``name``; InvalidConfigError naming it when it is not a
    topic config (:func:`unknown_topic_config`) or seglog does not implement it."""
    key = TOPIC_CONFIGS.get(name) if isinstance(name, str) else None
    if key is None:
        raise unknown_topic_config(name, suggest=suggest)
    if not key.implemented:
        raise not_implemented(key)
    return key


def broker_key(name: Any) -> ConfigKey:
    """The implemented broker config ``name``; InvalidConfigError naming it when it is not a
    broker config (:func:`unknown_broker_config`) or seglog does not implement it."""
    key = BROKER_CONFIGS.get(name) if isinstance(name, str) else None
    if key is None:
        raise unknown_broker_config(name)
    if not key.implemented:
        raise not_implemented(key)
    return key
