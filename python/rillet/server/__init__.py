"""Wiring of one process: config -> components, listeners, lifecycle.

:mod:`rillet.server.meta_properties` holds Kafka's ``meta.properties`` (which cluster and
node a log directory belongs to) and the checks a server runs on its log dirs before start.
"""
