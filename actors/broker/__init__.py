"""The broker: queue, consumer manager and consumers as actors (seeds 000 and 001)."""
