"""Character vocabulary shared by the char-level model, the compact trainer and the TRL tokenizer.

Ids: 0 = pad, 1 = beginning of sequence ``^``, 2 = end of sequence ``$``, then one id per character of the task
alphabet. Plain Python (no torch).
"""

from __future__ import annotations

from collections.abc import Iterable

from envs.reasoning.tasks import ALPHABET

PAD, BOS, EOS = "<pad>", "^", "$"


class CharVocab:
    """Maps characters to ids and back.

    Args:
        alphabet: The task characters (default: every character of :mod:`envs.reasoning` tasks); must not contain
            ``^`` or ``$``.
    """

    def __init__(self, alphabet: str = ALPHABET) -> None:
        if BOS in alphabet or EOS in alphabet or len(set(alphabet)) != len(alphabet):
            raise ValueError(f"alphabet must have distinct characters other than {BOS!r} and {EOS!r}")
        self.alphabet = alphabet
        self.tokens: list[str] = [PAD, BOS, EOS, *alphabet]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, bos: bool = False) -> list[int]:
        """Ids of ``text`` (``^`` prepended if ``bos``).

        Raises:
            ValueError: a character outside the vocabulary.
        """
        try:
            ids = [self.index[c] for c in text]
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the vocabulary {self.alphabet!r}") from exc
        return [self.bos_id, *ids] if bos else ids

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of ``ids``, pads and BOS dropped; stops at the first EOS (which is kept as ``$``) if asked."""
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                out.append(EOS)
                if stop_at_eos:
                    break
            elif i > self.bos_id and i < len(self.tokens):
                out.append(self.tokens[i])
        return "".join(out)
