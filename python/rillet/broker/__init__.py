"""The broker's data plane: partitions, the replica manager and delayed operations."""
