"""``rolloutlab wordle serve``: the assistant behind a local web page.

The page (``planning/wordle/page.html``, plain HTML and JavaScript, nothing fetched from the internet) posts the same
lines a player types at the terminal (``salet 01002``, ``undo``, ``why crane``, ``extend``...) to one
:class:`~planning.wordle.assistant.Assistant`, so the rules, the checks on bad input and the coach are the terminal's.
Each answer carries the messages the assistant wrote (the coach, refusals, notices; not the board and suggestion
text, which the page draws itself) and a JSON snapshot of the position: the board, the suggestion and its
alternatives, the answers left, and the fallback lists on offer.

One game per server: it is a local tool for one player, and every tab of the page shows the same game (and the
messages of its last command, so that reloading the page keeps the coach's last word). Flask serves requests on
threads, so a lock keeps one command at a time.

A request body is refused before it is parsed when it is too large (from its declared length, and again while it is
read) or nested too deep (a scan of the brackets), so no request can make the server read hundreds of megabytes or
recurse until it fails.
"""

from __future__ import annotations

import errno
import importlib.resources
import json
import socket
import threading
from typing import Any

from flask import Flask, Response, jsonify, request

from planning.wordle.assistant import FALLBACKS, Assistant
from planning.wordle.solver import WordleSolver

#: Longest command line accepted (the longest real one, ``extend all`` or a word and its squares, is far shorter).
MAX_LINE = 200
#: Largest request body read, in bytes: a line of MAX_LINE characters each escaped as a surrogate pair (12 bytes)
#: fits with room to spare.
MAX_BODY = 16 * 1024
#: Deepest nesting of JSON arrays and objects accepted (a command is one object: depth 1).
MAX_DEPTH = 16


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests arrays and objects deeper than ``limit``; brackets inside strings do not count.

    A linear scan that needs no parsing, so it is safe on any input (the parser itself recurses per level).
    """
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


class ListenError(Exception):
    """The server cannot listen where it was asked to; the message names the cause and what to pass instead."""


def describe_listen_error(host: str, port: int, exc: OSError) -> str:
    """What went wrong binding ``host:port``, in words that name the cause and the option that fixes it."""
    where = f"cannot listen on {host}:{port}"
    if isinstance(exc, socket.gaierror):
        return f"{where}: {host} is not a known host name or address; pass --host 127.0.0.1 or an address of yours"
    if exc.errno == errno.EADDRINUSE:
        return f"{where}: port {port} is in use; pass another --port (0 picks a free one)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"{where}: {host} is not an address of this machine; pass --host 127.0.0.1 (this machine only), "
            "0.0.0.0 (every address) or one of its own addresses"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{where}: permission denied (ports below 1024 need administrator rights); pass a --port of 1024 or more"
    return f"{where} ({exc.strerror or exc})"


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, for ``werkzeug.serving.make_server(..., fd=...)``.

    Bound here rather than by werkzeug, which prints the error and exits on any failure, so that the cause (address
    not on this machine, port in use, no permission) reaches the user.

    Raises:
        ListenError: With :func:`describe_listen_error`'s message.
    """
    from werkzeug.serving import get_sockaddr, select_address_family

    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug does: restart despite TIME_WAIT
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(describe_listen_error(host, port, exc)) from exc
    return sock


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
        #: The messages of the last command (the welcome before the first): what a reloaded page shows again.
        self.last_messages = self._drain()

    def _drain(self) -> list[str]:
        out, self._messages[:] = list(self._messages), []
        return out

    def command(self, line: str) -> dict[str, Any]:
        """Run one line as the terminal would; returns ``{"messages": [...], "state": snapshot}``."""
        with self.lock:
            if line.strip().lower() in ("quit", "exit", "q"):  # the page has no session to end
                messages = ["(The page keeps running: close the tab, or stop the server with Ctrl-C.)"]
            else:
                self.assistant.handle_safely(line)
                messages = self._drain()
            self.last_messages = messages
            return {"messages": messages, "state": self.snapshot()}

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


def _error(message: str, status: int) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def create_app(game: WebGame) -> Flask:
    """The Flask app serving ``game``: ``GET /`` (the page), ``GET /api/state``, ``POST /api/command``."""
    app = Flask(__name__)
    html = page_html()
    too_large = f"request body over {MAX_BODY} bytes"

    @app.get("/")
    def index() -> Response:
        return Response(html, mimetype="text/html")

    @app.get("/api/state")
    def state() -> Response:
        with game.lock:
            return jsonify({"messages": game.last_messages, "state": game.snapshot()})

    @app.post("/api/command")
    def command() -> tuple[Response, int] | Response:
        usage = 'send JSON {"line": "<what you would type at the terminal>"}'
        # The size is checked from the declared length before a byte is read, then while reading (a body without a
        # length, or longer than it said, stops at MAX_BODY + 1 bytes).
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _error(too_large, 413)
        if not request.is_json:
            return _error(usage, 400)
        raw = request.stream.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            return _error(too_large, 413)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _error("request body is not UTF-8", 400)
        if json_depth_exceeds(text, MAX_DEPTH):  # before parsing: the parser recurses once per level
            return _error(f"JSON nested deeper than {MAX_DEPTH} levels; {usage}", 400)
        try:
            body = json.loads(text)
        except ValueError:
            return _error(usage, 400)
        line = body.get("line") if isinstance(body, dict) else None
        if not isinstance(line, str):
            return _error(usage, 400)
        if len(line) > MAX_LINE:
            return _error(f"line longer than {MAX_LINE} characters", 400)
        return jsonify(game.command(line))

    return app
