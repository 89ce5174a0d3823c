"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords, DescribeCluster, DescribeLogDirs."""

from __future__ import annotations

from ..registry import ApiHandler

HANDLERS: tuple[ApiHandler, ...] = ()
