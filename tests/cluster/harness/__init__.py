"""The harness that proves a seglog cluster (issue 12, R§6): a recorded history of sends and
polls made by real, unmodified Kafka clients (:mod:`.workload`), faults injected into the
cluster's processes and network (:mod:`.faults`), and a Jepsen-style checker over the history
(:mod:`.checker`, events in :mod:`.history`)."""
