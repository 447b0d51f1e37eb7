"""Benchmark protocol and experiment scripts of the mbrl pillar."""
