"""``seglog serve``: a single-node broker that speaks Kafka's wire protocol over a
:class:`~seglog.store.Store`.

Unmodified Kafka clients (kcat, confluent-kafka, kafka-python, aiokafka, Kafka's Java clients
and tools) connect to it over TCP. The layers, top to bottom:

- :mod:`seglog.server.broker`: the :class:`Broker` (start/stop, context manager, asyncio),
  the listener and the background tasks; :mod:`seglog.server.connection`: one connection's
  framing, response order, limits and back-pressure; :mod:`seglog.server.config`: Kafka's
  broker configs (:class:`BrokerConfig`);
- :mod:`seglog.server.protocol`: request headers, decoding requests and encoding responses
  (kio's classes for most APIs, seglog's own code for the hot Produce and Fetch paths);
- :mod:`seglog.server.registry` and :mod:`seglog.server.context`: the contract between the core
  and the API handlers;
- :mod:`seglog.server.apis`: one module per family of Kafka APIs (data, groups, transactions,
  admin), each a table of handlers.

The server sits above the store and the coordinators and below nothing: the storage, the
coordinators, the embedded clients and the store never import it (``tests/test_layout.py``).
"""
