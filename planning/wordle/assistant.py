"""The interactive Wordle assistant behind ``rolloutlab wordle play``.

It suggests a guess (with the policy's top alternatives and their exact expected number of guesses), reads back the
guess actually played and its colours, narrows the candidates and repeats. Input and output are injected callables,
so a whole session can be driven from a list of lines in a test. Every bad line -- malformed input, an unknown word,
a hard-mode violation, colours no remaining answer can produce -- gets a message and changes nothing.

Colours can be typed in three notations, one symbol per letter: ``gybbg`` (green / yellow / black), ``21002``
(2 green, 1 yellow, 0 grey) or the game's share squares ``🟩🟨⬛`` (white ⬜ and the high-contrast 🟧 green / 🟦 yellow
squares are read too).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from dataclasses import dataclass, field

from envs.wordle_rules import GREEN, GREY, YELLOW, WordLists, encode_pattern, feedback, parse_word_list
from planning.wordle.alternatives import Alternative
from planning.wordle.model import WordleBelief
from planning.wordle.solver import WordleSolver

_SYMBOLS: dict[str, int] = {
    "g": GREEN,
    "y": YELLOW,
    "b": GREY,
    "2": GREEN,
    "1": YELLOW,
    "0": GREY,
    "🟩": GREEN,
    "🟨": YELLOW,
    "⬛": GREY,
    "⬜": GREY,
    "🟧": GREEN,
    "🟦": YELLOW,
}
_SQUARES = {GREEN: "🟩", YELLOW: "🟨", GREY: "⬛"}

HELP = """\
Type the word you played and the colours you got, e.g.  salet bybbg
  colours: g/y/b letters (green, yellow, black), digits 2/1/0, or the squares 🟩🟨⬛, one per letter
  only the colours (e.g. bybbg) means you played my suggestion
Commands: undo (take back the last guess), list (every remaining answer), why WORD (how good WORD is here),
new (a new game), help, quit
When the colours rule out every listed answer: extend (go on over the extended hidden list), extend all (over every
allowed word)"""

#: The commands that continue a game over a wider answer list, and what each list is.
FALLBACKS = {"extend": "extended hidden list", "extend all": "whole allowed list"}
#: Alex Selby's extended hidden list (envs/wordle_data/SOURCE.md): the NYT now picks answers beyond the original 2315.
EXTENDED_LIST = "nyt_hidden_extended_3158.txt"


def words_that_fit(words: tuple[str, ...] | list[str], history: list[tuple[str, tuple[int, ...]]]) -> list[str]:
    """The ``words`` that would have given every ``(guess, colours)`` of ``history``, in their order."""
    return [w for w in words if all(feedback(guess, w) == colours for guess, colours in history)]


def _fit(n: int) -> str:
    return f"{count(n, 'word')} {'fits' if n == 1 else 'fit'}"


def extended_answers(allowed: tuple[str, ...]) -> list[str]:
    """The extended hidden list's words that are also allowed guesses of the current lists."""
    text = (importlib.resources.files("envs.wordle_data") / EXTENDED_LIST).read_text(encoding="utf-8")
    allowed_set = set(allowed)
    return [w for w in parse_word_list(text, "extended hidden list") if w in allowed_set]


class InputError(ValueError):
    """A line the assistant cannot use; the message says why."""


def normalise_word(text: str, length: int | None = None) -> str:
    """``text`` as a lower-case word of the letters a-z.

    The letters are checked before any change of case: Unicode case mapping turns some other letters into ASCII ones
    (the long s ``ſ`` upper-cases to S, the Kelvin sign lower-cases to k), which would pass ``ſalet`` off as SALET.

    Args:
        text: The word as typed (surrounding spaces ignored).
        length: Letters the word must have (``None``: any number).

    Raises:
        InputError: A character outside A-Z, or not ``length`` letters.
    """
    word = text.strip()
    bad = sorted({ch for ch in word if not ("a" <= ch <= "z" or "A" <= ch <= "Z")})
    if bad:
        shown = " ".join(ch if ch.isprintable() and not ch.isspace() else repr(ch) for ch in bad)
        what = f"{word!r} is not a {length}-letter word: it has" if length is not None else f"{word!r} has"
        raise InputError(f"{what} characters other than the letters A-Z ({shown}); type plain letters a-z")
    if length is not None and len(word) != length:
        raise InputError(f"{word!r} is not a {length}-letter word")
    return word.lower()


def parse_colours(text: str, length: int) -> tuple[int, ...]:
    """Colours from any of the three notations.

    Args:
        text: The typed colours (case-insensitive; spaces and emoji variation selectors ignored).
        length: Letters per word.

    Raises:
        InputError: Unknown symbols or the wrong number of them.
    """
    cleaned = [ch for ch in text.lower() if ch not in " \t\ufe0f\u200d"]
    bad = sorted({ch for ch in cleaned if ch not in _SYMBOLS})
    if bad:
        raise InputError(f"colours {text!r}: unknown symbol(s) {' '.join(bad)}; use g/y/b, 2/1/0 or 🟩🟨⬛")
    if len(cleaned) != length:
        raise InputError(f"colours {text!r}: {len(cleaned)} symbols for {length} letters")
    return tuple(_SYMBOLS[ch] for ch in cleaned)


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``count(1, "guess")`` is ``"1 guess"``.

    Args:
        n: How many.
        noun: The singular; the plural adds ``es`` after s, x, z, ch or sh and ``s`` otherwise.
    """
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}{'es' if noun.endswith(('s', 'x', 'z', 'ch', 'sh')) else 's'}"


def display_order(alternatives: list[Alternative], suggestion: str | None = None) -> list[Alternative]:
    """Alternatives in the order they are shown: expected guesses, then answers past the limit, then the suggestion
    before the guesses tied with it, then A-Z.

    The solver returns them in its own preference (a rollout ranks answers lost past the limit before the total,
    greedy keeps the heuristic's order), which reads as unsorted next to the expected-guesses column, most of all in
    hard mode where such losses are common. One order for every mode and policy; a guess that risks the limit keeps
    its note. Among equally good guesses the suggestion leads, so that the table never seems to contradict it.

    Args:
        alternatives: The solver's contenders.
        suggestion: The suggested guess (``None``: ties stay A-Z).
    """
    return sorted(alternatives, key=lambda alt: (alt.expected, alt.overruns, alt.word != suggestion, alt.word))


def squares(colours: tuple[int, ...]) -> str:
    """The share-square rendering of ``colours``."""
    return "".join(_SQUARES[c] for c in colours)


@dataclass
class _State:
    """One position: the solver over the word list in force (a fallback list after `extend`), the belief and the
    moves. `undo` restores all three: a position before an `extend` is over the list it had then."""

    solver: WordleSolver
    belief: WordleBelief
    history: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)


@dataclass(frozen=True)
class Advice:
    """What the assistant recommends at one position, for the terminal and the web page alike.

    Attributes:
        remaining: The answers that still fit, A-Z.
        opener: The suggested first guess (before the first move only).
        suggestion: The suggested next guess (after the first move, while more than one answer fits).
        alternatives: The policy's contenders in display order (:func:`display_order`), with ``suggestion`` first
            among those tied with it.
    """

    remaining: list[str]
    opener: str | None = None
    suggestion: str | None = None
    alternatives: list[Alternative] = field(default_factory=list)

    @property
    def forced(self) -> str | None:
        """The answer, once only one fits."""
        return self.remaining[0] if len(self.remaining) == 1 else None


class Assistant:
    """One assistant session over a configured solver.

    Args:
        solver: The policy to consult.
        write: Prints one message (may contain newlines).
        n_alternatives: Alternatives shown with each suggestion.
        list_below: List the remaining answers when at most this many are left.
        use_book: Answer the second move from the solver's cached book of replies to its opener
            (:mod:`planning.wordle.book`), computing it at the first second move if the cache lacks it.
        show_position: Write the board, the answers left and the suggestion after each move (a page that draws
            them from :meth:`advice` turns this off and keeps the messages: the coach, refusals, notices).
    """

    def __init__(
        self,
        solver: WordleSolver,
        write: Callable[[str], None],
        n_alternatives: int = 5,
        list_below: int = 12,
        use_book: bool = False,
        show_position: bool = True,
    ) -> None:
        self.first_solver = solver  # `new` goes back to it after a game that went on over a fallback list
        self.use_book = use_book
        self.write = write
        self.n_alternatives = n_alternatives
        self.list_below = list_below
        self.show_position = show_position
        self.state = _State(solver, solver.root())
        self.undo_stack: list[_State] = []
        self.solved = False
        # After colours that no listed answer gives: the move and, per fallback command, the words that fit.
        self.pending: tuple[list[tuple[str, tuple[int, ...]]], dict[str, list[str]]] | None = None
        self._advice: tuple[_State, Advice] | None = None

    @property
    def solver(self) -> WordleSolver:
        """The solver of the current position (over a fallback list once the game went on over one)."""
        return self.state.solver

    @property
    def depth(self) -> int:
        """Guesses played so far."""
        return len(self.state.history)

    def advice(self) -> Advice:
        """The recommendation at the current position (computed once per position: the page asks again)."""
        if self._advice is not None and self._advice[0] is self.state:
            return self._advice[1]
        solver, belief = self.solver, self.state.belief
        words = sorted(solver.lists.answers[i] for i in belief.candidates)
        if len(words) == 1:
            advice = Advice(words)
        elif self.depth == 0:
            advice = Advice(words, opener=solver.lists.allowed[solver.opener()])
        else:
            self._prepare_book()
            suggestion = solver.lists.allowed[solver.act(belief, self.depth)]
            alternatives = solver.alternatives(belief, self.depth, self.n_alternatives)
            advice = Advice(words, suggestion=suggestion, alternatives=display_order(alternatives, suggestion))
        self._advice = (self.state, advice)
        return advice

    def _prepare_book(self) -> None:
        """Load (or build, once, saying so) the second-move book the first time a second move is asked for."""
        solver = self.solver
        if not (self.use_book and self.depth == 1 and solver.book is None):
            return
        from planning.wordle.book import book_path

        if not book_path(solver).exists():
            self.write("(Computing the replies to every feedback on the opener, once; this can take a minute.)")
        book = solver.enable_book()
        if book.built and book.write_error is None:
            self.write(f"(Computed in {book.seconds:.0f} s and cached in {book.path}.)")
        elif book.built:
            self.write(
                f"(Computed in {book.seconds:.0f} s, but it could not be cached ({book.write_error}); "
                "it will be computed again next time.)"
            )

    def suggest(self) -> None:
        """Print the suggestion for the current position."""
        advice, limit = self.advice(), self.solver.config.max_guesses
        if not self.show_position:
            return
        if advice.forced is not None:
            self.write(f"It must be {advice.forced.upper()}.")
            return
        if advice.opener is not None:
            self.write(
                f"Suggested opener: {advice.opener.upper()} ({count(len(advice.remaining), 'possible answer')}; "
                "compare openers with `rolloutlab wordle bench --opener auto`)"
            )
            return
        assert advice.suggestion is not None
        self.write(f"Suggested: {advice.suggestion.upper()}")
        lines = ["  guess   expected guesses in all   could win now"]
        for alt in advice.alternatives:
            late = f"   ({count(alt.overruns, 'answer')} would need > {limit})" if alt.overruns else ""
            lines.append(
                f"  {alt.word.upper()}   {self.depth + alt.expected:6.3f}   {'yes' if alt.could_win else 'no'}{late}"
            )
        self.write("\n".join(lines))

    def _report(self) -> None:
        if not self.show_position:
            return
        words = [self.solver.lists.answers[i] for i in self.state.belief.candidates]
        board = "\n".join(f"  {w.upper()} {squares(c)}" for w, c in self.state.history)
        self.write(board)
        if len(words) <= self.list_below:
            self.write(f"{count(len(words), 'possible answer')}: {', '.join(w.upper() for w in sorted(words))}")
        else:
            self.write(count(len(words), "possible answer"))

    def handle(self, line: str) -> bool:
        """Process one input line; returns False when the session should end."""
        text = line.strip()
        command = " ".join(text.lower().split())  # commands are whole words, however they are spaced
        if command in ("quit", "exit", "q"):
            self.write("Bye.")
            return False
        if command in ("help", "?", "h"):
            self.write(HELP)
            return True
        if command == "undo":
            if not self.undo_stack:
                self.write("Nothing to undo.")
                return True
            self.state = self.undo_stack.pop()
            self.solved = False
            self.pending = None
            self.write("Took back the last guess.")
            if self.state.history:
                self._report()
            self.suggest()
            return True
        if not text:
            self.write("Type your guess and its colours, or `help`.")
            return True
        if command in FALLBACKS:
            self._extend(command)
            return True
        if command == "list":
            words = sorted(self.solver.lists.answers[i] for i in self.state.belief.candidates)
            self.write(f"{count(len(words), 'possible answer')}: {', '.join(w.upper() for w in words)}")
            return True
        if command == "new":
            first = self.first_solver
            self.state, self.undo_stack, self.solved, self.pending = _State(first, first.root()), [], False, None
            self.write("New game.")
            self.suggest()
            return True
        if command.partition(" ")[0] == "why":  # a whole word: WHYDA is a guess, not `why DA`
            self._why(text[len("why") :].strip())  # the word as typed: its letters are checked before any lower()
            return True
        if self.solved:
            self.write("This game is solved: `undo` to go back, or `quit`.")
            return True
        try:
            word, colours = self._parse_move(text)
        except InputError as exc:
            self.write(f"Not understood: {exc}. Type `help` for the format.")
            return True
        self._play(word, colours)
        return True

    def _parse_move(self, text: str) -> tuple[str, tuple[int, ...]]:
        solver = self.solver
        length = solver.lists.length
        parts = text.split(maxsplit=1)
        if len(parts) == 1:
            try:
                colours = parse_colours(parts[0], length)
            except InputError as not_colours:
                try:
                    word = normalise_word(parts[0], length)
                except InputError:
                    raise not_colours from None
                if word in solver.lists.allowed:
                    raise InputError(f"also type the colours you got for {word.upper()}") from None
                raise
            if len(self.state.belief.candidates) == 1:
                word = solver.lists.answers[int(self.state.belief.candidates[0])]
            else:
                word = solver.lists.allowed[solver.act(self.state.belief, self.depth)]
            return word, colours
        word = normalise_word(parts[0], length)
        if word not in solver.lists.allowed:
            raise InputError(f"{word.upper()} is not in the allowed word list")
        hints = self.state.belief.hints
        if hints is not None:
            violation = hints.violation(word)
            if violation is not None:
                raise InputError(f"hard mode: {word.upper()} is not allowed here ({violation})")
        return word, parse_colours(parts[1], length)

    def _play(self, word: str, colours: tuple[int, ...]) -> None:
        solver = self.solver
        guess = solver.lists.allowed.index(word)
        belief = solver.model.observe(self.state.belief, guess, encode_pattern(colours))
        self.pending = None
        if belief.candidates.size == 0:
            self._offer_fallback(word, colours)
            return
        if not all(c == GREEN for c in colours):
            self.write(self._coach(guess, int(belief.candidates.size)))
        self.undo_stack.append(self.state)
        self.state = _State(solver, belief, [*self.state.history, (word, colours)])
        self._after_move(word, colours)

    def _rate(self, guess: int) -> str:
        """How ``guess`` compares with the solver's choice at the current position, in expected guesses in all."""
        solver, belief, depth = self.solver, self.state.belief, self.depth
        word = solver.lists.allowed[guess].upper()
        if depth == 0:
            # Valuing an opener exactly means playing every answer to the end (about a minute with rollout).
            return f"{word} as an opener (openers are compared by `rolloutlab wordle bench --opener auto`)"
        best = solver.lists.allowed[solver.act(belief, depth)]
        mine = solver.value_of(belief, depth, guess)
        if mine is None:
            return f"{word} cannot tell the remaining answers apart"
        risk = f", {count(mine.overruns, 'answer')} past guess {solver.config.max_guesses}" if mine.overruns else ""
        if best == mine.word:
            return f"{word} is my suggestion ({depth + mine.expected:.3f} expected guesses in all{risk})"
        top = solver.value_of(belief, depth, solver.lists.allowed.index(best))
        assert top is not None
        gap = mine.expected - top.expected
        return (
            f"{word}: {depth + mine.expected:.3f} expected guesses in all{risk}; my suggestion {best.upper()}: "
            f"{depth + top.expected:.3f} ({abs(gap):.3f} {'more' if gap >= 0 else 'fewer'})"
        )

    def _coach(self, guess: int, left: int) -> str:
        """The coach's line on a move just typed: its value against the best guess, and how lucky the colours were."""
        expected = self.solver.expected_left(self.state.belief, guess)
        ratio = left / expected if expected > 0 else 1.0
        luck = "lucky" if ratio < 0.75 else "unlucky" if ratio > 1.33 else "about as expected"
        return (
            f"Coach: {self._rate(guess)}. The colours left {count(left, 'answer')}, against {expected:.1f} expected "
            f"for this guess: {luck}."
        )

    def _why(self, word: str) -> None:
        """``why WORD``: how good WORD would be at the current position."""
        solver = self.solver
        if not word:
            self.write("Usage: why WORD (e.g. `why crane`).")
            return
        try:
            word = normalise_word(word)
        except InputError as exc:
            self.write(f"Not understood: {exc}.")
            return
        if word not in solver.lists.allowed:
            self.write(f"{word.upper()} is not in the allowed word list.")
            return
        if self.solved:
            self.write("This game is solved: `undo` to go back, or `new`.")
            return
        hints = self.state.belief.hints
        violation = None if hints is None else hints.violation(word)
        if violation is not None:
            self.write(f"Hard mode: {word.upper()} is not allowed here ({violation}).")
            return
        guess = solver.lists.allowed.index(word)
        expected = solver.expected_left(self.state.belief, guess)
        self.write(f"{self._rate(guess)}; it would leave {expected:.1f} answers on average.")

    def _offer_fallback(self, word: str, colours: tuple[int, ...]) -> None:
        """No listed answer fits: say which wider lists still have words that fit, and how to go on over them."""
        solver = self.solver
        history = [*self.state.history, (word, colours)]
        listed = set(solver.lists.answers)
        pools = {
            "extend": words_that_fit([w for w in extended_answers(solver.lists.allowed) if w not in listed], history),
            "extend all": words_that_fit([w for w in solver.lists.allowed if w not in listed], history),
        }
        name = solver.lists.name  # after an `extend` it already ends with "list"
        listed_as = name if name.endswith(" list") else f"{name} list"
        lines = [f"No answer in the {listed_as} gives {squares(colours)} for {word.upper()}."]
        for command, words in pools.items():
            if words:
                shown = ", ".join(w.upper() for w in words[:5]) + (", ..." if len(words) > 5 else "")
                lines.append(
                    f"  `{command}`: go on over the {FALLBACKS[command]} ({_fit(len(words))} every colour so far: "
                    f"{shown})"
                )
        if any(pools.values()):
            self.pending = (history, pools)
            lines.append("Or check the colours (nothing changed).")
        else:
            lines.append("No allowed word fits every colour so far either: check the colours (nothing changed).")
        self.write("\n".join(lines))

    def _extend(self, command: str) -> None:
        """Continue the game over the words of a fallback list that fit (the answers of a new solver)."""
        if self.pending is None or not self.pending[1][command]:
            self.write(
                f"`{command}` continues a game whose colours ruled out every listed answer; "
                + ("there is none now." if self.pending is None else f"no word of the {FALLBACKS[command]} fits.")
            )
            return
        history, pools = self.pending
        old = self.solver
        lists = WordLists(tuple(pools[command]), old.lists.allowed, f"{old.lists.name} + {FALLBACKS[command]}")
        solver = WordleSolver(old.config, lists)
        self.pending = None
        belief = solver.root()
        for guess, colours in history:
            belief = solver.model.observe(belief, lists.allowed.index(guess), encode_pattern(colours))
        # The earlier positions keep their own list: `undo` past this move goes back to the list in force then.
        self.undo_stack.append(self.state)
        self.state = _State(solver, belief, list(history))
        self.write(f"Going on over the {FALLBACKS[command]}: {_fit(len(lists.answers))} every colour so far.")
        word, colours = history[-1]
        self._after_move(word, colours)

    def _after_move(self, word: str, colours: tuple[int, ...]) -> None:
        solver = self.solver
        if all(c == GREEN for c in colours):
            self._report()
            self.solved = True
            limit = solver.config.max_guesses
            if self.depth <= limit:
                self.write(f"Solved in {count(self.depth, 'guess')}! (`undo` to go back, `quit` to leave)")
            else:  # the game itself ended at the limit; "solved in 7" would claim a win it never had
                self.write(
                    f"Found {word.upper()} on guess {self.depth}, past the {limit}-guess limit: the game itself was "
                    "lost. (`undo` to go back, `quit` to leave)"
                )
            return
        self._report()
        if self.depth >= solver.config.max_guesses:
            self.write(f"That was guess {self.depth}: the game is over, but here is what I would play next.")
        self.suggest()

    def start(self) -> None:
        """Greet and suggest the opener: the start of every session."""
        config = self.solver.config
        self.write(
            f"Wordle assistant ({config.mode} mode, {config.policy} over {config.heuristic.upper()}, "
            f"lists: {self.solver.lists.name}). Type `help` for the input format."
        )
        self.suggest()

    def handle_safely(self, line: str) -> bool:
        """:meth:`handle`, except that an unforeseen error is reported and changes nothing.

        A safety net: the assistant must not die mid-game on a case nobody foresaw. A move is recorded before its
        suggestion is computed, so the position is put back, or the guess the user types again would count twice.
        """
        saved = (self.state, list(self.undo_stack), self.solved, self.pending)
        try:
            return self.handle(line)
        except Exception as exc:
            self.state, self.undo_stack, self.solved, self.pending = saved
            self.write(f"Sorry, something went wrong ({type(exc).__name__}: {exc}); nothing changed.")
            return True

    def run(self, read: Callable[[str], str]) -> None:
        """Run the session until ``quit`` or end of input.

        Args:
            read: Returns one line given a prompt; raises ``EOFError`` to end the session.

        Raises:
            KeyboardInterrupt: Ctrl-C, at the prompt or during a move; passed on so that the caller can exit with
                the interrupted status (the CLI's 130) instead of the success that a plain end of input is.
        """
        self.start()
        while True:
            try:
                line = read("> ")
            except EOFError:
                self.write("Bye.")
                return
            if not self.handle_safely(line):
                return
