"""Wordle's rules: feedback, pattern codes, the NYT hard-mode rule and word lists (the ground floor).

Everything that defines the game lives here, once: the env (:mod:`envs.wordle`) plays by it and the planners
(:mod:`planning.wordle`) plan over it. Nothing here imports another rolloutlab package.

* **Feedback** (two passes, the rule the game uses for repeated letters): first every letter in its right place is
  green; then, left to right, a remaining guess letter is yellow if the answer still has an unmatched copy of it
  (copies already used by greens or earlier yellows do not count), otherwise grey. So ``speed`` against ``abide``
  gives one yellow ``e`` (the second ``e`` is grey), and ``sease`` against ``essay`` gives ``yyyyb``.
* **Pattern codes**: the colours of a word of length L read as a base-3 number, first letter most significant, with
  grey = 0, yellow = 1, green = 2 (the ``21002`` notation). The all-green code is ``3**L - 1``.
* **Hard mode** (the NYT rule): every green must stay in its place and every revealed letter (green or yellow) must be
  reused, as many times as it was revealed; grey letters may be reused.
* **Word lists**: one word per line, all the same length L >= 2, lowercase ``a``-``z``, no duplicates, answers a
  subset of the allowed guesses. Anything else is rejected with the line number and the reason. The shipped lists
  are package data in ``envs/wordle_data/`` (provenance in ``SOURCE.md``).
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GREY, YELLOW, GREEN = 0, 1, 2
_WORD_RE = re.compile(r"[a-z]+")

#: Named list pairs shipped with the package: (answers file, allowed file) in ``envs/wordle_data``.
BUILTIN_LISTS: dict[str, tuple[str, str]] = {
    "original": ("answers.txt", "allowed.txt"),
    "nyt": ("nyt_answers_2309.txt", "nyt_allowed_14855.txt"),
}


def feedback(guess: str, answer: str) -> tuple[int, ...]:
    """Colours of ``guess`` against ``answer`` (0 grey, 1 yellow, 2 green), by the two-pass duplicate-letter rule.

    Args:
        guess: The guessed word.
        answer: The hidden answer, same length.

    Returns:
        One colour per letter of ``guess``.
    """
    if len(guess) != len(answer):
        raise ValueError(f"guess {guess!r} and answer {answer!r} differ in length")
    colours = [GREY] * len(guess)
    unmatched: dict[str, int] = {}
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            colours[i] = GREEN
        else:
            unmatched[a] = unmatched.get(a, 0) + 1
    for i, g in enumerate(guess):
        if colours[i] != GREEN and unmatched.get(g, 0) > 0:
            colours[i] = YELLOW
            unmatched[g] -= 1
    return tuple(colours)


def encode_pattern(colours: Sequence[int]) -> int:
    """Pattern code of a colour tuple: base 3, first letter most significant."""
    code = 0
    for c in colours:
        code = code * 3 + int(c)
    return code


def decode_pattern(code: int, length: int) -> tuple[int, ...]:
    """Inverse of :func:`encode_pattern` for words of ``length`` letters."""
    digits = []
    for _ in range(length):
        code, digit = divmod(code, 3)
        digits.append(digit)
    return tuple(reversed(digits))


def solved_code(length: int) -> int:
    """The all-green pattern code for words of ``length`` letters."""
    return int(3**length - 1)


def words_to_array(words: Sequence[str]) -> np.ndarray:
    """Letters as integers 0..25, shape ``(len(words), L)``, dtype int8."""
    if not words:
        return np.zeros((0, 0), dtype=np.int8)
    raw = np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8)
    return (raw.reshape(len(words), len(words[0])) - ord("a")).astype(np.int8)


def letter_counts(words: np.ndarray) -> np.ndarray:
    """Per-word letter counts, shape ``(N, 26)``, dtype int8, from a ``(N, L)`` letter array."""
    counts = np.zeros((words.shape[0], 26), dtype=np.int8)
    for pos in range(words.shape[1]):
        np.add.at(counts, (np.arange(words.shape[0]), words[:, pos]), 1)
    return counts


@dataclass(frozen=True)
class HardHints:
    """What the NYT hard-mode rule forces into later guesses.

    Attributes:
        greens: Per position, the letter (0..25) that must stay there, or -1.
        min_counts: Per letter a..z, how many copies a guess must contain (the most revealed by any one guess).
    """

    greens: tuple[int, ...]
    min_counts: tuple[int, ...]

    def __hash__(self) -> int:
        # Hints key the planners' memo tables (millions of lookups in hard mode): hash the 31 numbers once.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.greens, self.min_counts))
            object.__setattr__(self, "_hash", cached)
        return cached

    @classmethod
    def empty(cls, length: int) -> HardHints:
        """No hints yet, for words of ``length`` letters."""
        return cls((-1,) * length, (0,) * 26)

    def update(self, guess: str, colours: Sequence[int]) -> HardHints:
        """The hints after ``guess`` was answered with ``colours``."""
        greens = list(self.greens)
        revealed: dict[int, int] = {}
        for i, (letter, colour) in enumerate(zip(guess, colours, strict=True)):
            index = ord(letter) - ord("a")
            if colour == GREEN:
                greens[i] = index
            if colour != GREY:
                revealed[index] = revealed.get(index, 0) + 1
        min_counts = list(self.min_counts)
        for index, times in revealed.items():
            min_counts[index] = max(min_counts[index], times)
        return HardHints(tuple(greens), tuple(min_counts))

    def violation(self, word: str) -> str | None:
        """Why ``word`` breaks the hard-mode rule, or ``None`` if it is a legal guess."""
        for i, letter_index in enumerate(self.greens):
            if letter_index >= 0 and ord(word[i]) - ord("a") != letter_index:
                return f"letter {i + 1} must be {chr(letter_index + ord('a')).upper()}"
        for letter_index, need in enumerate(self.min_counts):
            letter = chr(letter_index + ord("a"))
            if word.count(letter) < need:
                times = "" if need == 1 else f" {need} times"
                return f"guess must contain {letter.upper()}{times}"
        return None

    def mask(self, letters: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Boolean mask of the legal guesses among words given as ``(N, L)`` letters and ``(N, 26)`` counts."""
        ok = np.ones(len(letters), dtype=bool)
        for letter_index, need in enumerate(self.min_counts):
            if need > 0:
                ok &= counts[:, letter_index] >= need
        for i, letter_index in enumerate(self.greens):
            if letter_index >= 0:
                ok &= letters[:, i] == letter_index
        return ok


class WordListError(ValueError):
    """A word list breaks a rule; the message names the file, the line number and the reason."""


def parse_word_list(text: str, name: str, length: int | None = None) -> list[str]:
    """Parse and validate one list: one word per line, lowercase a-z, one fixed length >= 2, no duplicates.

    Args:
        text: File contents. A final newline is fine; blank lines are not.
        name: File name for messages.
        length: Required word length; ``None`` takes it from the first word.

    Raises:
        WordListError: On the first bad line, naming it and the reason.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise WordListError(f"{name}: the list is empty")
    seen: dict[str, int] = {}
    words = []
    for number, raw in enumerate(lines, start=1):
        word = raw[:-1] if raw.endswith("\r") else raw
        where = f"{name}, line {number}"
        if word == "":
            raise WordListError(f"{where}: blank line")
        if word != word.strip():
            raise WordListError(f"{where}: {word!r} has surrounding whitespace")
        if not _WORD_RE.fullmatch(word):
            raise WordListError(f"{where}: {word!r} must be lowercase letters a-z only")
        if length is None:
            if len(word) < 2:
                raise WordListError(f"{where}: {word!r} is shorter than 2 letters")
            length = len(word)
        elif len(word) != length:
            raise WordListError(f"{where}: {word!r} has {len(word)} letters, the list uses {length}")
        if word in seen:
            raise WordListError(f"{where}: {word!r} repeats line {seen[word]}")
        seen[word] = number
        words.append(word)
    return words


@dataclass(frozen=True)
class WordLists:
    """A validated pair of lists: the possible answers and the allowed guesses (answers included)."""

    answers: tuple[str, ...]
    allowed: tuple[str, ...]
    name: str

    @property
    def length(self) -> int:
        """Letters per word."""
        return len(self.answers[0])

    def answer_rows(self) -> np.ndarray:
        """Index in ``allowed`` of every answer, shape ``(len(answers),)``, int64."""
        where = {word: i for i, word in enumerate(self.allowed)}
        return np.array([where[word] for word in self.answers], dtype=np.int64)


def make_word_lists(answers_text: str, allowed_text: str, name: str = "custom") -> WordLists:
    """Validate two lists given as text (see :func:`parse_word_list`) and check answers are allowed guesses."""
    answers = parse_word_list(answers_text, f"{name} answers")
    allowed = parse_word_list(allowed_text, f"{name} allowed", length=len(answers[0]))
    allowed_set = set(allowed)
    for number, word in enumerate(answers, start=1):
        if word not in allowed_set:
            raise WordListError(f"{name} answers, line {number}: {word!r} is not in the allowed list")
    return WordLists(tuple(answers), tuple(allowed), name)


def load_word_lists(spec: str = "original") -> WordLists:
    """Load ``original``, ``nyt`` or ``ANSWERS_PATH,ALLOWED_PATH``, validated.

    Raises:
        WordListError: A custom file is unreadable or breaks a rule.
    """
    if spec in BUILTIN_LISTS:
        data = importlib.resources.files("envs.wordle_data")
        answers_file, allowed_file = BUILTIN_LISTS[spec]
        return make_word_lists(
            (data / answers_file).read_text(encoding="utf-8"), (data / allowed_file).read_text(encoding="utf-8"), spec
        )
    parts = spec.split(",")
    if len(parts) != 2:
        raise WordListError(f"lists must be 'original', 'nyt' or 'ANSWERS_PATH,ALLOWED_PATH', got {spec!r}")
    texts = []
    for part in parts:
        try:
            # utf-8-sig drops a leading byte-order mark (Notepad's "UTF-8 with BOM"): no part of the first word.
            texts.append(Path(part).read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError) as exc:
            raise WordListError(f"cannot read {part}: {exc}") from exc
    return make_word_lists(texts[0], texts[1], name=f"{parts[0]},{parts[1]}")
