"""The subscriber client as actors (seed 003): flow control, leases, ordering keys, dispatch."""
