"""Checkers: pure functions over traces."""
