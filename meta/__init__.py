"""Meta-controllers: deciding how far and how much to roll out, from feedback about the learning process.

``meta.controllers`` imports numpy only, so an LLM training script can use a controller without gymnasium, SB3 or TRL.
"""
