"""Benchmarks against peers and baselines (never part of the tests): bench/run_all.py."""
