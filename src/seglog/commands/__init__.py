"""The ``seglog`` command line's data tools (issue 26): ``produce``, ``consume``, ``topics``,
``groups`` and ``dump``.

Each tool works in two modes, chosen by :mod:`seglog.commands.target`'s options: on a local
data directory directly (``--data-dir``, no broker, through :class:`seglog.Store`), or against
any Kafka-protocol broker (``--bootstrap-server``, seglog's or Apache Kafka's, through
librdkafka with Kafka's client properties from ``--command-config``). One module per tool;
each has ``add_parser(sub)`` (registers its subcommand, with ``set_defaults(run=main)``) and
``main(args) -> int`` (the exit code, :mod:`seglog.commands.target`'s ``EXIT_*``).
"""
