"""A local character-level Hugging Face tokenizer over :class:`meta.rlvr.lm.vocab.CharVocab` (no hub access needed).

TRL's ``GRPOTrainer`` wants a ``processing_class``: this one encodes ``"35+7="`` as ``^ 3 5 + 7 =`` (BOS prepended),
decodes ids back to characters, and names ``<pad>`` / ``^`` / ``$`` as the pad / BOS / EOS tokens, with the same ids
the compact trainer uses.
"""

from __future__ import annotations

import json
import os
from typing import Any

from transformers.tokenization_python import PythonBackend

from envs.reasoning.tasks import ALPHABET
from meta.rlvr.lm.vocab import BOS, EOS, PAD, CharVocab


class CharTokenizer(PythonBackend):
    """Character tokenizer; every character of the alphabet is one token.

    Args:
        alphabet: Task characters (as in :class:`CharVocab`).
        **kwargs: Passed to the transformers base class.
    """

    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012 - transformers reads a class attribute

    def __init__(self, alphabet: str = ALPHABET, **kwargs: Any) -> None:
        self.char_vocab = CharVocab(alphabet)
        kwargs.setdefault("special_tokens_pattern", "bos")
        super().__init__(pad_token=PAD, bos_token=BOS, eos_token=EOS, padding_side="left", **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self.char_vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.char_vocab.index)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return list(text)

    def _convert_token_to_id(self, token: str) -> int:
        if token not in self.char_vocab.index:
            raise ValueError(f"character {token!r} is not in the vocabulary {self.char_vocab.alphabet!r}")
        return self.char_vocab.index[token]

    def _convert_id_to_token(self, index: int) -> str:
        return self.char_vocab.tokens[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        path = os.path.join(save_directory, (filename_prefix or "") + "char_vocab.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"alphabet": self.char_vocab.alphabet}, handle)
        return (path,)
