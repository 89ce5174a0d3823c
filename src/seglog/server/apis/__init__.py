"""The Kafka APIs the broker serves, one module per family; see :mod:`seglog.server.registry`
for what each module defines."""
