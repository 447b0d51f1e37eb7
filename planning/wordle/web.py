"""``rolloutlab wordle serve``: the assistant behind a local web page.

The page (``planning/wordle/page.html``, plain HTML and JavaScript, nothing fetched from the internet) posts the same
lines a player types at the terminal (``salet 01002``, ``undo``, ``why crane``, ``extend``...) to one
:class:`~planning.wordle.assistant.Assistant`, so the rules, the checks on bad input and the coach are the terminal's.
Each answer carries the messages the assistant wrote (the coach, refusals, notices; not the board and suggestion
text, which the page draws itself) and a JSON snapshot of the position: the board, the suggestion and its
alternatives, the answers left, and the fallback lists on offer.

One game per server: it is a local tool for one player, and every tab of the page shows the same game. Flask serves
requests on threads, so a lock keeps one command at a time.
"""

from __future__ import annotations

import importlib.resources
import threading
from typing import Any

from flask import Flask, Response, jsonify, request

from planning.wordle.assistant import FALLBACKS, Assistant
from planning.wordle.solver import WordleSolver

#: Longest command line accepted (the longest real one, ``extend all`` or a word and its squares, is far shorter).
MAX_LINE = 200


class WebGame:
    """One assistant session whose output is collected per command instead of printed.

    Args:
        solver: The configured policy.
        n_alternatives: Alternatives shown with each suggestion.
        use_book: Answer the second move from the cached book of replies to the opener.
    """

    def __init__(self, solver: WordleSolver, n_alternatives: int = 5, use_book: bool = True) -> None:
        self._messages: list[str] = []
        self.assistant = Assistant(
            solver, self._messages.append, n_alternatives=n_alternatives, use_book=use_book, show_position=False
        )
        self.lock = threading.Lock()
        self.assistant.start()
        self.welcome = self._drain()

    def _drain(self) -> list[str]:
        out, self._messages[:] = list(self._messages), []
        return out

    def command(self, line: str) -> dict[str, Any]:
        """Run one line as the terminal would; returns ``{"messages": [...], "state": snapshot}``."""
        with self.lock:
            if line.strip().lower() in ("quit", "exit", "q"):  # the page has no session to end
                return {
                    "messages": ["(The page keeps running: close the tab, or stop the server with Ctrl-C.)"],
                    "state": self.snapshot(),
                }
            self.assistant.handle_safely(line)
            return {"messages": self._drain(), "state": self.snapshot()}

    def snapshot(self) -> dict[str, Any]:
        """The position as JSON-ready data: everything the page draws."""
        assistant = self.assistant
        solver, depth = assistant.solver, assistant.depth
        advice = assistant.advice() if not assistant.solved else None
        pending = assistant.pending
        return {
            "mode": solver.config.mode,
            "lists": solver.lists.name,
            "length": solver.lists.length,
            "max_guesses": solver.config.max_guesses,
            "board": [{"word": word, "colours": list(colours)} for word, colours in assistant.state.history],
            "solved": assistant.solved,
            "remaining": sorted(solver.lists.answers[i] for i in assistant.state.belief.candidates),
            "opener": None if advice is None else advice.opener,
            "forced": None if advice is None else advice.forced,
            "suggestion": None if advice is None else advice.suggestion,
            "alternatives": []
            if advice is None
            else [
                {
                    "word": alt.word,
                    "expected_total": depth + alt.expected,
                    "could_win": alt.could_win,
                    "overruns": alt.overruns,
                }
                for alt in advice.alternatives
            ],
            "fallbacks": []
            if pending is None
            else [
                {"command": command, "list": FALLBACKS[command], "fits": len(words), "words": words[:5]}
                for command, words in pending[1].items()
                if words
            ],
            "can_undo": bool(assistant.undo_stack),
        }


def page_html() -> str:
    """The page, as shipped with the package."""
    return (importlib.resources.files("planning.wordle") / "page.html").read_text(encoding="utf-8")


def create_app(game: WebGame) -> Flask:
    """The Flask app serving ``game``: ``GET /`` (the page), ``GET /api/state``, ``POST /api/command``."""
    app = Flask(__name__)
    html = page_html()

    @app.get("/")
    def index() -> Response:
        return Response(html, mimetype="text/html")

    @app.get("/api/state")
    def state() -> Response:
        with game.lock:
            return jsonify({"messages": game.welcome, "state": game.snapshot()})

    @app.post("/api/command")
    def command() -> tuple[Response, int] | Response:
        body = request.get_json(silent=True)
        line = body.get("line") if isinstance(body, dict) else None
        if not isinstance(line, str):
            return jsonify({"error": 'send JSON {"line": "<what you would type at the terminal>"}'}), 400
        if len(line) > MAX_LINE:
            return jsonify({"error": f"line longer than {MAX_LINE} characters"}), 400
        return jsonify(game.command(line))

    return app
