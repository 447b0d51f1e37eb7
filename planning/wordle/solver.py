"""Wordle solvers: a configured policy (greedy heuristic or rollout over it), exact evaluation and single games.

:class:`WordleSolver` assembles the pieces: word lists, the cached pattern table, :class:`WordleModel`, a
:class:`HeuristicPolicy` and optionally a :class:`planning.rollout.RolloutPolicy` over it. The first guess is a fixed
opener (``salet`` by default), the policy's own choice (``opener=None``) or, with ``opener="auto"``, the best of the
heuristic's top candidates judged by exact evaluation of the whole game under the policy.

Evaluation is exact: the policy is played as a decision tree over every answer at once
(:class:`planning.rollout.PolicyEvaluator`); :meth:`WordleSolver.play` plays one game against a known answer, and the
two agree answer by answer (tested). Games longer than ``max_guesses`` are *failures*: they are played to the end so
the total stays comparable, and counted and reported separately.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.wordle_rules import WordLists, decode_pattern, load_word_lists
from planning.rollout import (
    PolicyEvaluator,
    RolloutPolicy,
    action_profile,
    profile_overruns,
    profile_total,
)
from planning.wordle.alternatives import BOOK_ALTERNATIVES, Alternative
from planning.wordle.book import SecondMoveBook
from planning.wordle.exact import ExactSmallPolicy
from planning.wordle.heuristics import HEURISTICS, HeuristicPolicy
from planning.wordle.model import WordleBelief, WordleModel
from planning.wordle.table import TableLoad, load_pattern_table

#: Per mode, the rollout's k, its k at the second guess and the base policy's exact-solver size: the best measured
#: configuration, which ``rolloutlab wordle play``, ``serve``, ``solve`` and ``bench`` use for every option not given.
#: The second guess decides most: looking at the heuristic's 100 best there brings most listed openers to Selby's
#: proven optimum (hard mode with 30 left 9 of the 20 best openers 1-3 guesses above it; 100 became affordable once
#: the exact solver passed limits down its search), and in easy mode exact play on beliefs of <= 20 answers lifts that
#: from 94 to 102 of 105 openers; hard mode reaches the optimum from all 20 of its best openers
#: (``experiments/wordle/results/openers.json``; the earlier runs are in git history). From salet it gives the optima
#: 7920 easy and 8122 hard.
DEFAULT_TOP_K: dict[str, int] = {"easy": 10, "hard": 5}
DEFAULT_SECOND_TOP_K: dict[str, int] = {"easy": 100, "hard": 100}
DEFAULT_EXACT_UP_TO: dict[str, int] = {"easy": 20, "hard": 40}


class UnknownOpenerError(ValueError):
    """The configured opener is not an allowed guess of the lists (the lists themselves are fine)."""


@dataclass
class SolverConfig:
    """How to play.

    Attributes:
        mode: ``easy`` or ``hard`` (NYT rule: greens stay, revealed letters are reused).
        policy: ``greedy`` (the heuristic alone) or ``rollout`` (one-step lookahead over its top-k).
        heuristic: ``mig``, ``mrd``, ``gep`` or ``minimax``.
        top_k: Rollout contenders per decision.
        second_top_k: Rollout contenders at the second guess (the replies to the opener), where a wider look pays
            most: a few hundred beliefs, each deciding the cost of many answers (0 = ``top_k``).
        opener: First guess: a word, ``auto`` (chosen by rollout among the heuristic's top ``top_k``) or ``None``
            (the policy decides at the root, which costs one full-belief decision).
        lists: ``original``, ``nyt`` or ``ANSWERS_PATH,ALLOWED_PATH``.
        guesses: ``all`` allowed words or only ``answers`` as guesses.
        max_guesses: Guesses per game; longer games are failures.
        candidate_tiebreak: Prefer possible answers among equal scores and guess a candidate with <= 2 left. False
            reproduces the paper's plain greedy policy.
        widen_k: Rollout contenders to re-examine when all top-k would run past ``max_guesses`` (0 = never).
        exact_up_to: Base policy plays the exact optimum on beliefs of at most this many candidates
            (:class:`planning.wordle.exact.ExactSmallPolicy`; 0 = the heuristic everywhere).
    """

    mode: str = "easy"
    policy: str = "rollout"
    heuristic: str = "gep"
    top_k: int = 10
    second_top_k: int = 0
    opener: str | None = "salet"
    lists: str = "original"
    guesses: str = "all"
    max_guesses: int = 6
    candidate_tiebreak: bool = True
    widen_k: int = 100
    exact_up_to: int = 0

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if self.mode not in ("easy", "hard"):
            raise ValueError(f"mode must be easy or hard, got {self.mode!r}")
        if self.policy not in ("greedy", "rollout"):
            raise ValueError(f"policy must be greedy or rollout, got {self.policy!r}")
        if self.heuristic not in HEURISTICS:
            raise ValueError(f"heuristic must be one of {HEURISTICS}, got {self.heuristic!r}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.second_top_k < 0:
            raise ValueError(f"second_top_k must be >= 0, got {self.second_top_k}")
        if self.guesses not in ("all", "answers"):
            raise ValueError(f"guesses must be all or answers, got {self.guesses!r}")
        if self.max_guesses < 1:
            raise ValueError(f"max_guesses must be >= 1, got {self.max_guesses}")
        if self.exact_up_to < 0:
            raise ValueError(f"exact_up_to must be >= 0, got {self.exact_up_to}")


@dataclass
class Evaluation:
    """Exact result of a policy over every answer.

    Attributes:
        total: Guesses summed over all answers (failures included, played to the end).
        answers: Number of answers.
        distribution: ``{guesses: games}``.
        failures: Games that needed more than ``max_guesses``.
        seconds: Wall-clock seconds of the evaluation (list and table loading excluded).
        opener: The first guess played.
        opener_search: With ``opener="auto"``, each first guess tried: ``{"word", "total", "failures"}``.
    """

    total: int
    answers: int
    distribution: dict[int, int]
    failures: int
    seconds: float
    opener: str | None
    opener_search: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mean(self) -> float:
        """Mean guesses per answer."""
        return self.total / self.answers

    @property
    def max(self) -> int:
        """Most guesses any answer needed."""
        return max(self.distribution)


class WordleSolver:
    """A configured Wordle policy over a cached pattern table.

    Args:
        config: What to play.
        lists: Pre-loaded lists (default: load ``config.lists``).
        table: Pre-loaded pattern table (default: from the cache, building it if needed).
    """

    def __init__(self, config: SolverConfig, lists: WordLists | None = None, table: TableLoad | None = None) -> None:
        config.validate()
        self.config = config
        self.lists = lists or load_word_lists(config.lists)
        self.table_load = table or load_pattern_table(self.lists)
        pool = self.lists.answer_rows() if config.guesses == "answers" else None
        self.model = WordleModel(self.lists, self.table_load.table, hard=config.mode == "hard", guess_pool=pool)
        self.heuristic = HeuristicPolicy(
            self.model, config.heuristic, config.candidate_tiebreak, last_guess=config.max_guesses
        )
        self.base: HeuristicPolicy | ExactSmallPolicy = self.heuristic
        if config.exact_up_to > 0:
            self.base = ExactSmallPolicy(self.model, self.heuristic, config.exact_up_to, config.max_guesses)
        self.base_evaluator = PolicyEvaluator(self.model, self.base)
        self.rollout: RolloutPolicy[WordleBelief, int] | None = None
        if config.policy == "rollout":
            self.rollout = RolloutPolicy(
                self.model,
                self.base,
                config.top_k,
                horizon=config.max_guesses,
                base_evaluator=self.base_evaluator,
                widen_k=config.widen_k or None,
                depth_top_k={1: config.second_top_k} if config.second_top_k else None,
            )
        self.evaluator = PolicyEvaluator(self.model, self.rollout or self.base)
        self.book: SecondMoveBook | None = None
        self._opener: int | None = None
        self.opener_search: list[dict[str, Any]] = []
        #: Show a progress bar (stderr) while ``opener="auto"`` values its candidate openers (tens of seconds each).
        self.show_progress = False
        if config.opener not in (None, "auto"):
            try:
                self._opener = self.index_of(config.opener)
            except ValueError as exc:  # its own type, so callers can point at --opener and at nothing else
                raise UnknownOpenerError(f"opener {exc}") from None

    def index_of(self, word: str) -> int:
        """Allowed-list index of ``word``; ``ValueError`` if it is not an allowed guess."""
        try:
            return self.lists.allowed.index(word.lower())
        except ValueError:
            raise ValueError(f"{word!r} is not in the allowed list") from None

    def root(self) -> WordleBelief:
        """The belief before the first guess."""
        return self.model.root()

    def act(self, belief: WordleBelief, depth: int) -> int:
        """The solver's guess (allowed-list index) at ``belief`` after ``depth`` guesses."""
        if depth == 0:
            return self.opener()
        entry = self.book.lookup(belief, depth) if self.book is not None else None
        if entry is not None:
            return entry.guess
        return self.evaluator.policy.act(belief, depth)

    def enable_book(self, directory: Path | None = None) -> SecondMoveBook:
        """Answer the second move from the cached book of replies to the opener (computing it once if missing)."""
        if self.book is None:
            self.book = SecondMoveBook(self, directory)
        return self.book

    def opener(self) -> int:
        """The first guess, choosing it first if the config says ``auto`` or ``None``."""
        if self._opener is None:
            root = self.root()
            if self.config.opener == "auto":
                self._opener = self._search_opener(root)
            else:
                self._opener = self.evaluator.policy.act(root, 0)
        return self._opener

    def _search_opener(self, root: WordleBelief) -> int:
        # Rollout at the root: each of the heuristic's top-k first guesses is judged by the exact cost of the whole
        # game under the configured policy (the greedy heuristic, or rollout) from the second guess on.
        from tqdm.auto import tqdm

        best_key: tuple[int, int] | None = None
        best_guess = -1
        candidates = self.heuristic.ranked(root, self.config.top_k, 0)
        bar = tqdm(candidates, desc="openers", unit="opener", disable=not self.show_progress, file=sys.stderr)
        for guess in bar:
            profile = self._profile_after(root, guess)
            key = (profile_overruns(profile, 0, self.config.max_guesses), profile_total(profile))
            self.opener_search.append({"word": self.lists.allowed[guess], "total": key[1], "failures": key[0]})
            if best_key is None or key < best_key:  # strict: the heuristic's order breaks ties
                best_key, best_guess = key, guess
            bar.set_postfix(best=f"{self.lists.allowed[best_guess].upper()} {best_key[1]}")
        bar.close()
        return best_guess

    def _profile_after(self, belief: WordleBelief, guess: int, depth: int = 0) -> np.ndarray:
        profile = action_profile(self.model, belief, guess, lambda child: self.evaluator.profile(child, depth + 1))
        if profile is None:
            raise ValueError(f"{self.lists.allowed[guess]!r} tells nothing here")
        return profile

    def evaluate(self) -> Evaluation:
        """Exact evaluation over every answer (the decision tree of the policy, memoized on beliefs)."""
        start = time.perf_counter()
        root = self.root()
        opener = self.opener()
        profile = self._profile_after(root, opener)
        distribution = {int(j): int(c) for j, c in enumerate(profile) if c > 0}
        failures = sum(c for j, c in distribution.items() if j > self.config.max_guesses)
        return Evaluation(
            total=profile_total(profile),
            answers=int(profile.sum()),
            distribution=distribution,
            failures=failures,
            seconds=time.perf_counter() - start,
            opener=self.lists.allowed[opener],
            opener_search=list(self.opener_search),
        )

    def play(self, answer: str) -> list[tuple[str, tuple[int, ...]]]:
        """Play one game against ``answer``; returns ``(guess, colours)`` per move until solved."""
        try:
            target = self.lists.answers.index(answer.lower())
        except ValueError:
            raise ValueError(f"{answer!r} is not in the answer list") from None
        belief = self.root()
        moves = []
        for depth in range(64):
            guess = self.act(belief, depth)
            code = int(self.model.table[guess, target])
            moves.append((self.lists.allowed[guess], decode_pattern(code, self.lists.length)))
            if code == self.model.solved:
                return moves
            belief = self.model.observe(belief, guess, code)
        raise RuntimeError(f"no solution for {answer!r} within 64 guesses")

    def alternatives(self, belief: WordleBelief, depth: int, n: int = 5) -> list[Alternative]:
        """The policy's contenders at ``belief`` with exact expected guesses (this one included), best first.

        From the second-move book when it is enabled and holds this belief, else :meth:`compute_alternatives`.
        """
        entry = self.book.lookup(belief, depth) if self.book is not None else None
        if entry is not None and (n <= len(entry.alternatives) or len(entry.alternatives) < BOOK_ALTERNATIVES):
            return entry.alternatives[:n]  # the book holds them all (or as many as there are)
        return self.compute_alternatives(belief, depth, n)

    def compute_alternatives(self, belief: WordleBelief, depth: int, n: int = 5) -> list[Alternative]:
        """The policy's contenders at ``belief`` with exact expected guesses (this one included), best first.

        For rollout these are its top-k, each valued by playing the heuristic to the end; for greedy, the heuristic's
        top ``n`` valued the same way.
        """
        size = self.model.size(belief)
        answer_rows = set(self.model.answer_rows[belief.candidates].tolist())
        if self.rollout is not None:
            scored = self.rollout.scores(belief, depth)
            choice = self.rollout.act(belief, depth)
            if all(s.action != choice for s in scored):  # found by the widened search: show it too
                extra = self.rollout.score(belief, choice, depth)
                scored += [] if extra is None else [extra]
            ranked = sorted(scored, key=lambda s: (s.overruns, s.total))
            return [
                Alternative(self.lists.allowed[s.action], s.total / size, s.action in answer_rows, s.overruns)
                for s in ranked[:n]
            ]
        out = []
        for guess in self.base.ranked(belief, n, depth):
            profile = action_profile(
                self.model, belief, guess, lambda child: self.base_evaluator.profile(child, depth + 1)
            )
            if profile is None:
                continue
            overruns = profile_overruns(profile, depth, self.config.max_guesses)
            out.append(
                Alternative(self.lists.allowed[guess], profile_total(profile) / size, guess in answer_rows, overruns)
            )
        return out

    def value_of(self, belief: WordleBelief, depth: int, guess: int) -> Alternative | None:
        """Exact expected guesses (this one included) of playing ``guess`` at ``belief`` and then this policy's
        own choices (the base heuristic's, for rollout: the value rollout ranks its contenders by); ``None`` when
        the guess can tell nothing apart (every remaining answer gives it the same colours and it is not one)."""
        size = self.model.size(belief)
        answer_rows = set(self.model.answer_rows[belief.candidates].tolist())
        if self.rollout is not None:
            scored = self.rollout.score(belief, guess, depth)
            if scored is None:
                return None
            return Alternative(self.lists.allowed[guess], scored.total / size, guess in answer_rows, scored.overruns)
        profile = action_profile(self.model, belief, guess, lambda child: self.base_evaluator.profile(child, depth + 1))
        if profile is None:
            return None
        overruns = profile_overruns(profile, depth, self.config.max_guesses)
        return Alternative(self.lists.allowed[guess], profile_total(profile) / size, guess in answer_rows, overruns)

    def expected_left(self, belief: WordleBelief, guess: int) -> float:
        """Expected number of answers left after ``guess`` (each remaining answer equally likely): ``sum n_c^2 / n``
        over the colour classes ``c`` it splits the answers into."""
        codes = self.model.table[guess, belief.candidates]
        counts = np.bincount(codes.astype(np.int64))
        return float((counts.astype(np.float64) ** 2).sum() / max(len(codes), 1))

    def describe(self) -> dict[str, Any]:
        """The resolved configuration, for JSON output."""
        return asdict(self.config)
