"""conveyor's domain actors: the broker, the subscriber client and the Pub/Sub front (``pubsub``)."""
