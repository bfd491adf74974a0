"""Cluster metadata: topic names now; metadata records and images with the KRaft issue."""
