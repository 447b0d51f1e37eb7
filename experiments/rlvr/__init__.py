"""Benchmark protocol and experiment scripts of the rlvr pillar."""
