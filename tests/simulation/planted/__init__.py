"""Planted bugs (issue 5): small variants of real actors that the simulator must find, and their tests."""
