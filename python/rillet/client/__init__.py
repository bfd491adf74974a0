"""The Python client, shaped like kafka-python: Producer, Consumer, AdminClient."""
