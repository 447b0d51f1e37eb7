"""Second-move book: the solver's reply to every feedback on its opener, computed once and cached on disk.

The assistant's slowest move is the first reply after the opener: the beliefs are largest there (up to a few hundred
answers), and in hard mode the rollout may have to widen its search. But with a fixed opener there are at most
``3**L`` such beliefs, the same in every game, so their replies (and the alternatives shown with them) are computed
once, for all of them together (sharing the base policy's memo), and kept in the user cache directory under a name
keyed by the lists' SHA-256 and everything in the solver's configuration that can change a reply (mode, policy,
heuristic, k, opener, ...). A missing, corrupt or mismatched file is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from envs.wordle_rules import WordLists
from planning.wordle.alternatives import BOOK_ALTERNATIVES, Alternative
from planning.wordle.model import WordleBelief, WordleModel
from planning.wordle.table import cache_dir, lists_digest

_FORMAT = "rolloutlab-wordle-book-v2"


class _Policy(Protocol):
    def act(self, belief: WordleBelief, depth: int) -> int: ...


class _Evaluator(Protocol):
    @property
    def policy(self) -> _Policy: ...


class BookSolver(Protocol):
    """What the book needs of its solver (:class:`planning.wordle.solver.WordleSolver` has it): the book receives
    the solver rather than importing the solver's module, which imports this one."""

    config: Any  # a dataclass (SolverConfig): every field but ``lists`` keys the cache file
    lists: WordLists
    model: WordleModel

    @property
    def evaluator(self) -> _Evaluator: ...

    def opener(self) -> int: ...

    def root(self) -> WordleBelief: ...

    def compute_alternatives(self, belief: WordleBelief, depth: int, n: int = 5) -> list[Alternative]: ...


@dataclass
class BookEntry:
    """The reply to one feedback on the opener: the guess (allowed-list index) and the ranked alternatives."""

    guess: int
    alternatives: list[Alternative]


def book_path(solver: BookSolver, directory: Path | None = None) -> Path:
    """The cache file of ``solver``'s book (it may not exist yet)."""
    digest = hashlib.sha256(json.dumps(book_key(solver), sort_keys=True).encode()).hexdigest()
    return (directory or cache_dir()) / f"wordle-book-{digest[:32]}.json"


def book_key(solver: BookSolver) -> dict[str, Any]:
    """Everything a second-move reply depends on: the lists' digest, the resolved opener and the configuration."""
    config = asdict(solver.config)
    config.pop("lists")  # the digest identifies the lists' contents; the name does not
    config["opener"] = solver.lists.allowed[solver.opener()]
    return {"format": _FORMAT, "lists_sha256": lists_digest(solver.lists), "config": config}


class SecondMoveBook:
    """Replies to every feedback on the solver's opener, loaded from the cache or computed and cached.

    Args:
        solver: The configured solver (its opener is resolved first if it is ``auto`` or ``None``).
        directory: Cache directory; default :func:`planning.wordle.table.cache_dir`.

    Attributes:
        path: The cache file.
        built: True if computed now, False if loaded from the cache.
        write_error: Why a book computed now could not be written to ``path`` (``None`` if it was, or if it was
            loaded).
        seconds: Wall-clock seconds to load or compute.
    """

    def __init__(self, solver: BookSolver, directory: Path | None = None) -> None:
        start = time.perf_counter()
        self.solver = solver
        key = book_key(solver)
        self.path = book_path(solver, directory)
        self._opener = solver.opener()
        root = solver.root()
        self._children = {code: child for code, child in solver.model.split(root, self._opener)[1]}
        entries = self._read(key)
        self.built = entries is None
        self.write_error: str | None = None
        if entries is None:
            entries = self._compute()
            try:
                self._write(key, entries)
            except OSError as exc:  # a read-only cache only costs a recomputation next time, but say so
                self.write_error = str(exc)
        self._entries = entries
        self.seconds = time.perf_counter() - start

    def __len__(self) -> int:
        """Number of feedbacks with a stored reply."""
        return len(self._entries)

    def lookup(self, belief: WordleBelief, depth: int) -> BookEntry | None:
        """The stored reply if ``belief`` is what the opener's feedback left after one guess, else ``None``."""
        if depth != 1 or belief.candidates.size == 0:
            return None
        model = self.solver.model
        code = int(model.table[self._opener, belief.candidates[0]])
        child = self._children.get(code)
        if child is None or model.key(child) != model.key(belief):  # another first guess was played
            return None
        return self._entries.get(code)

    def _compute(self) -> dict[int, BookEntry]:
        solver = self.solver
        out = {}
        for code, child in self._children.items():
            guess = solver.evaluator.policy.act(child, 1)
            out[code] = BookEntry(guess, solver.compute_alternatives(child, 1, BOOK_ALTERNATIVES))
        return out

    def _read(self, key: dict[str, Any]) -> dict[int, BookEntry] | None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            if raw["key"] != key:
                return None
            entries = {
                int(code): BookEntry(
                    int(e["guess"]),
                    [Alternative(str(w), float(x), bool(c), int(o)) for w, x, c, o in e["alternatives"]],
                )
                for code, e in raw["entries"].items()
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return entries if set(entries) == set(self._children) else None

    def _write(self, key: dict[str, Any], entries: dict[int, BookEntry]) -> None:
        from rolloutlab.checkpoint import atomic_write_json

        payload = {
            "key": key,
            "entries": {
                str(code): {
                    "guess": e.guess,
                    "alternatives": [[a.word, a.expected, a.could_win, a.overruns] for a in e.alternatives],
                }
                for code, e in entries.items()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, payload, indent=0)
