"""Benchmark protocol and experiment scripts of the wordle pillar."""
