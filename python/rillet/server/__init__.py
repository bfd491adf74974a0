"""One process: :mod:`rillet.server.process` is the composition root (config ->
components, listeners, start and stop order); :mod:`rillet.server.grpc` is the gRPC
transport. Request handling lives in :mod:`rillet.broker` and :mod:`rillet.controller`."""
