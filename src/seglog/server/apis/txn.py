"""InitProducerId and transactions: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions."""

from __future__ import annotations

from ..registry import ApiHandler

HANDLERS: tuple[ApiHandler, ...] = ()
