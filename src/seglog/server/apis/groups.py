"""FindCoordinator and Kafka's classic consumer group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete."""

from __future__ import annotations

from ..registry import ApiHandler

HANDLERS: tuple[ApiHandler, ...] = ()
