"""Client-side partition assignment for Kafka's CLASSIC group protocol.

protocol.py            ConsumerProtocolSubscription / ConsumerProtocolAssignment bytes (v0-3),
                       StickyAssignorUserData, the cooperative-sticky user data
"""
