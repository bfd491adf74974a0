"""Generated from proto/rillet/v1/*.proto by scripts/gen_proto.py: do not edit.

Regenerate with ``python scripts/gen_proto.py``; ``--check`` fails when these files
are stale. Import them through :mod:`rillet.protocol`.

Generated with grpcio-tools 1.85.1 and mypy-protobuf 5.1.0.
"""
