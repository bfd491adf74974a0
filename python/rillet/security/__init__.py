"""Security: TLS material, principals."""
