"""The embedded clients: :class:`~seglog.clients.producer.Producer`,
:class:`~seglog.clients.consumer.Consumer` and the key partitioner.

They reach the broker side (logs, coordinators) through the narrow interface a
:class:`~seglog.store.Store` hands them, the same calls a wire broker answers.
"""
