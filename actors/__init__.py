"""conveyor's domain actors: broker, subscriber, storage, transactions, Pub/Sub front."""
