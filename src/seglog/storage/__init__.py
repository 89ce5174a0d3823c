"""One partition on disk: Kafka's log layer. ``log`` (UnifiedLog: the Log class, locking, high
watermark, last stable offset, producer state, the write path), with its read methods in
``log_reads`` and its retention methods in ``log_retention`` (base classes Log extends),
``local_log`` (LocalLog: the segment chain, rolled, flushed, truncated and deleted under the
Log's lock), ``validator`` (LogValidator: client batches checked into a ValidationResult),
``reads`` (the reader snapshot and the segment walk of a read), ``loader`` (opening and
recovery), ``retention``, ``cleaner``, ``producer_state``, ``transactions`` and ``txnindex``,
``checkpoints``, ``partition_state``, ``locking``, ``config``, ``segments``.

Imports only seglog's leaf modules (errors, format, compression, filenames, results, types,
_backend, _contract) and a backend through ``seglog._backend``; never ``seglog.coordinator``,
``seglog.clients`` or ``seglog.store``.
"""
