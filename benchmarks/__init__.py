"""Reproducible benchmarks; each prints its figures beside its peers measured in the same run."""
