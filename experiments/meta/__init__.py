"""Benchmark protocol and experiment scripts of the meta pillar."""
