"""Log directories: the LogManager (placement, checkpoints, flush and retention scheduling),
the one ``.lock`` routine (``dir_lock``), and ``meta.properties`` (which cluster and node a
directory belongs to, and the checks a server runs on its directories before start)."""

from rillet.storage.log_manager import LogManager

__all__ = ["LogManager"]
