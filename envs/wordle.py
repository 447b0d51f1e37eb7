"""``rolloutlab/Wordle-v0``: Wordle as a gymnasium env (the rules are in :mod:`envs.wordle_rules`).

The hidden state is the answer; an action is a guess from the allowed list; the observation is the coloured feedback.
The env: ``Discrete(len(allowed))`` guess actions; a flat ``MultiDiscrete`` board of ``max_guesses`` rows x L tiles x
(letter 0..26, 0 = empty; colour 0..3, 0 = empty, 1 grey, 2 yellow, 3 green); reward -1 per guess; terminated when
solved, truncated after ``max_guesses`` (6) guesses. A hard-mode violation costs a guess and reveals nothing
(``info["hard_mode_violation"]``); ``action_masks()`` gives the legal guesses (for sb3-contrib's MaskablePPO).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.wordle_rules import HardHints, feedback, letter_counts, load_word_lists, words_to_array


class WordleEnv(gym.Env[np.ndarray, np.int64]):
    """Wordle as a gymnasium env (see the module docstring for spaces, rewards and the hard-mode rule).

    Args:
        hard: Enforce the NYT hard-mode rule.
        lists: ``original``, ``nyt`` or ``ANSWERS_PATH,ALLOWED_PATH``.
        max_guesses: Guesses before truncation.

    ``reset(options={"answer": word})`` fixes the answer; otherwise it is drawn from ``self.np_random``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self, hard: bool = False, lists: str = "original", max_guesses: int = 6, render_mode: str | None = None
    ):
        self.hard = hard
        self.lists = load_word_lists(lists)
        self.max_guesses = max_guesses
        self.render_mode = render_mode
        length = self.lists.length
        self._letters = words_to_array(self.lists.allowed)
        self._counts = letter_counts(self._letters)
        self.action_space = spaces.Discrete(len(self.lists.allowed))
        nvec = np.tile(np.array([27, 4], dtype=np.int64), max_guesses * length)
        self.observation_space = spaces.MultiDiscrete(nvec)
        self._board = np.zeros(nvec.shape, dtype=np.int64)
        self._answer = self.lists.answers[0]
        self._turn = 0
        self._hints = HardHints.empty(length)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        answer = (options or {}).get("answer")
        if answer is None:
            answer = self.lists.answers[int(self.np_random.integers(len(self.lists.answers)))]
        elif answer not in self.lists.answers:
            raise ValueError(f"{answer!r} is not in the answer list")
        self._answer = str(answer)
        self._turn = 0
        self._hints = HardHints.empty(self.lists.length)
        self._board[:] = 0
        return self._board.copy(), {"turn": 0}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(np.int64(action)):
            raise ValueError(f"invalid action {action!r}")
        guess = self.lists.allowed[int(action)]
        info: dict[str, Any] = {"guess": guess}
        violation = self._hints.violation(guess) if self.hard else None
        solved = False
        if violation is not None:
            info["hard_mode_violation"] = violation
        else:
            colours = feedback(guess, self._answer)
            self._hints = self._hints.update(guess, colours)
            length = self.lists.length
            row = self._board.reshape(self.max_guesses, length, 2)[self._turn]
            row[:, 0] = np.frombuffer(guess.encode("ascii"), dtype=np.uint8) - ord("a") + 1
            row[:, 1] = np.asarray(colours) + 1
            info["feedback"] = colours
            solved = guess == self._answer
        self._turn += 1
        info["turn"] = self._turn
        truncated = not solved and self._turn >= self.max_guesses
        if solved or truncated:
            info["answer"] = self._answer
        return self._board.copy(), -1.0, solved, truncated, info

    def action_masks(self) -> np.ndarray:
        """Legal guesses now: all of them in easy mode, the hard-mode-legal ones otherwise. Shape ``(n_allowed,)``."""
        if not self.hard:
            return np.ones(len(self.lists.allowed), dtype=bool)
        return self._hints.mask(self._letters, self._counts)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        board = self._board.reshape(self.max_guesses, self.lists.length, 2)
        marks = {1: "⬛", 2: "🟨", 3: "🟩"}
        rows = []
        for r in range(self._turn):
            word = "".join(chr(int(c) - 1 + ord("a")) for c in board[r, :, 0] if c > 0)
            rows.append(word.upper() + " " + "".join(marks.get(int(c), "?") for c in board[r, :, 1]))
        return "\n".join(rows)
