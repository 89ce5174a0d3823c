"""Kafka's admin APIs over the Store: CreateTopics, DeleteTopics, CreatePartitions
(:mod:`.admin_topics`), DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
(:mod:`.admin_config_apis`, over the config model of :mod:`.admin_configs`), DeleteRecords,
DescribeCluster, DescribeLogDirs (:mod:`.admin_cluster`).

Each handler answers as Kafka 4.4's broker and controller do (``ControllerApis``,
``ReplicationControlManager``, ``ConfigurationControlManager``, ``ConfigHelper``,
``ReplicaManager``): the same error codes and, where they come from the request, the same
messages (``tests/server/test_admin_differential.py`` compares them with the real broker).
This broker is one node: a replication factor above 1, or a replica on another node, is
INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT with Kafka's words.

Where seglog differs on purpose: internal topics (``__consumer_offsets``,
``__transaction_state``) cannot be deleted, grown or created by hand
(TOPIC_DELETION_DISABLED, INVALID_PARTITIONS, INVALID_TOPIC_EXCEPTION: the coordinators map
groups and transactional ids onto their partitions), and dynamic broker configs must be names
this broker knows (INVALID_CONFIG otherwise; Kafka keeps unknown names).

The ``start`` hook loads the dynamic broker configs (:mod:`.admin_state`): from then on
``BrokerState.config`` is the effective config (static under dynamic) and the store's topic
defaults follow it.
"""

from __future__ import annotations

from ..registry import ApiHandler
from .admin_cluster import delete_records, describe_cluster, describe_log_dirs
from .admin_config_apis import alter_configs, describe_configs, incremental_alter_configs
from .admin_state import dynamic_configs, start, stop
from .admin_topics import create_partitions, create_topics, delete_topics
from .admin_wire import TOPIC_PARTITIONS_MAX, topic_name_error

__all__ = ["HANDLERS", "TOPIC_PARTITIONS_MAX", "dynamic_configs", "start", "stop",
           "topic_name_error"]

HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(19, 2, 7, create_topics),
    ApiHandler(20, 1, 6, delete_topics),
    ApiHandler(21, 0, 2, delete_records),
    ApiHandler(32, 1, 4, describe_configs),
    ApiHandler(33, 0, 2, alter_configs),
    ApiHandler(35, 1, 5, describe_log_dirs),
    ApiHandler(37, 0, 3, create_partitions),
    ApiHandler(44, 0, 1, incremental_alter_configs),
    ApiHandler(60, 0, 2, describe_cluster),
)
