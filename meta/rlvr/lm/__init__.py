"""The language model the compact RLVR trainers train: a character-level causal transformer (:mod:`.charlm`, torch),
its vocabulary (:mod:`.vocab`) and a ``transformers`` tokenizer over it (:mod:`.tokenizer`). Import the modules
explicitly.
"""
