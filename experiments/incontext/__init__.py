"""Benchmark protocol and experiment scripts of the incontext pillar."""
