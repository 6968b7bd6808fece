"""Transactions over a queue (seed 004): a unit of work that takes and puts atomically, consume
policies, a per-queue DLQ and a listener container, on the broker's actors or on ZooKeeper."""
