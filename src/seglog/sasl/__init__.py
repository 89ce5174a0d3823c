"""SASL mechanisms as Kafka speaks them, for both sides of a connection: PLAIN
(:mod:`.plain`), SCRAM-SHA-256/512 (:mod:`.scram`: credentials, the server's and the client's
exchange) and Kafka's JAAS syntax (:mod:`.jaas`).

Pure functions and per-exchange objects over bytes and strings; they know nothing of sockets,
the broker or the cluster, so the broker's SASL listener (:mod:`seglog.server.sasl`) and the
broker's own inter-broker client (:mod:`seglog.cluster.inter_broker`) share them.
"""
