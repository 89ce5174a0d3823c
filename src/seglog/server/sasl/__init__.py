"""SASL authentication for ``seglog serve`` (issue 23): Kafka's SaslHandshake /
SaslAuthenticate exchange with PLAIN and SCRAM-SHA-256/512, as Kafka's brokers serve it.

- :mod:`.jaas`: ``sasl.jaas.config`` values (Kafka's JAAS syntax);
- :mod:`.settings`: a SASL listener's checked settings;
- :mod:`.plain`, :mod:`.scram`: the mechanisms (server side, and the client side the broker
  uses for its own inter-broker login);
- :mod:`.credentials`: where SCRAM credentials are kept (a lone broker's data directory);
- :mod:`.authenticator`: one connection's exchange and the check every request passes.

The wire handlers are :mod:`seglog.server.apis.sasl` (SaslHandshake, SaslAuthenticate) and
:mod:`seglog.server.apis.security` (the SCRAM credential APIs).
"""
