"""The quorum controller: a state machine over committed metadata records."""
