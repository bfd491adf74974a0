"""The ``rillet`` command: Kafka's tools as subcommands (``kafka-X.sh`` becomes ``rillet X``)."""
