"""The language model the compact RLVR trainers train: a character-level causal transformer (:mod:`.charlm`, torch),
its vocabulary (:mod:`.vocab`), a ``transformers`` tokenizer over it (:mod:`.tokenizer`) and KV-cached sampling with
per-token log-probabilities (:mod:`.sampling`). Import the modules explicitly.
"""
