"""Broker-side state kept in internal topics: the group coordinator and committed offsets
(``__consumer_offsets``), the transaction coordinator (``__transaction_state``), the producer
id allocator and the assignors members run.

Imports storage and the leaves, never ``seglog.clients``: the embedded clients and (next) the
wire broker both drive these classes.
"""
