"""Log directories: placement, checkpoints, flush and retention scheduling."""

from rillet.storage.log_manager import LogManager

__all__ = ["LogManager"]
