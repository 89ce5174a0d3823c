"""One partition on disk: Kafka's log layer (UnifiedLog, LocalLog, the loader, retention, the
cleaner, producer state, transaction indexes, checkpoint files).

Imports only seglog's leaf modules (errors, format, compression, filenames, results, types,
_backend) and a backend (``seglog._native`` or ``seglog.pure``); never ``seglog.coordinator``,
``seglog.clients`` or ``seglog.store``.
"""
