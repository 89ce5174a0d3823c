"""SASL authentication for ``seglog serve`` (issue 23): Kafka's SaslHandshake /
SaslAuthenticate exchange with PLAIN and SCRAM-SHA-256/512, as Kafka's brokers serve it.

- :mod:`.settings`: a SASL listener's checked settings (the JAAS syntax and the mechanisms
  themselves are :mod:`seglog.sasl`'s, shared with the inter-broker client);
- :mod:`.credentials`: where SCRAM credentials are kept (a lone broker's data directory);
- :mod:`.authenticator`: one connection's exchange and the check every request passes.

The wire handlers are :mod:`seglog.server.apis.sasl` (SaslHandshake, SaslAuthenticate) and
:mod:`seglog.server.apis.security` (the SCRAM credential APIs).
"""
