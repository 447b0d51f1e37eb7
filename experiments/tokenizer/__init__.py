"""Experiment scripts of the adaptive-length tokenizer (meta.tokenizer)."""
