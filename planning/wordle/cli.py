"""``rolloutlab wordle``: the assistant (``play``, or ``serve`` for a local web page), one game against a known word
(``solve``), benchmarks (``bench``) and the on-disk cache (``cache info``, ``cache clear``).

Heavy work (the pattern table) happens inside the commands, so ``rolloutlab --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from rolloutlab.runs import output_file_option

if TYPE_CHECKING:
    from planning.wordle.solver import WordleSolver

app = typer.Typer(
    help="Wordle as a POMDP: an assistant for real games, a solver and exact benchmarks.", no_args_is_help=True
)

cache_app = typer.Typer(
    help="The on-disk cache: pattern tables (about 30 MB per pair of lists) and second-move books.",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")

# The defaults of --top-k, --second-top-k and --exact-up-to are planning.wordle.solver's DEFAULT_TOP_K,
# DEFAULT_SECOND_TOP_K and DEFAULT_EXACT_UP_TO (the best measured configuration of each mode), spelled out here so that
# `--help` needs no import of the solver; a test keeps the two in step.
_TOP_K_HELP = "Rollout contenders per move (default: 10 easy, 5 hard)."
_SECOND_TOP_K_HELP = "Rollout contenders at the second guess (default: 100; 0: --top-k)."
_EXACT_HELP = (
    "Base policy plays the exact optimum on beliefs of at most this many answers (default: 20 easy, 40 hard; 0: off)."
)
_LISTS_HELP = "original (2315 answers / 12972 guesses), nyt (2309 / 14855) or ANSWERS_PATH,ALLOWED_PATH."


# The options `play` and `serve` share (the same assistant behind the terminal and the page); `solve` takes the
# solver's too.
_Hard = Annotated[bool, typer.Option("--hard", help="Hard mode (NYT rule).")]
_Lists = Annotated[str, typer.Option(help=_LISTS_HELP)]
_Policy = Annotated[str, typer.Option(help="rollout or greedy.")]
_Heuristic = Annotated[str, typer.Option(help="mig, mrd, gep or minimax.")]
_TopK = Annotated[int | None, typer.Option(help=_TOP_K_HELP)]
_SecondTopK = Annotated[int | None, typer.Option(help=_SECOND_TOP_K_HELP)]
_AssistantOpener = Annotated[str, typer.Option(help="Suggested first guess (a word, or none to let the policy pick).")]
_ExactUpTo = Annotated[int | None, typer.Option(help=_EXACT_HELP)]
_Book = Annotated[
    bool, typer.Option(help="Answer the second move from a book of replies to the opener, cached on disk.")
]
_Alternatives = Annotated[
    int, typer.Option(min=1, max=50, help="Alternatives shown with each suggestion (the book holds up to 10).")
]


def _search_sizes(
    mode: str, top_k: int | None, second_top_k: int | None, exact_up_to: int | None
) -> tuple[int, int, int]:
    """``(top_k, second_top_k, exact_up_to)`` for ``mode``: each as given, or the mode's default.

    The defaults (``DEFAULT_TOP_K``, ``DEFAULT_SECOND_TOP_K``, ``DEFAULT_EXACT_UP_TO``) are the configuration that
    reaches the proven optimum from the most openers (``experiments/wordle/results/openers.json``), so ``play``,
    ``serve``, ``solve`` and ``bench`` give the best measured play without any flag. An unknown mode gets the easy
    sizes and is refused by the configuration's own check.
    """
    from planning.wordle.solver import DEFAULT_EXACT_UP_TO, DEFAULT_SECOND_TOP_K, DEFAULT_TOP_K

    key = mode if mode in DEFAULT_TOP_K else "easy"
    return (
        DEFAULT_TOP_K[key] if top_k is None else top_k,
        DEFAULT_SECOND_TOP_K[key] if second_top_k is None else second_top_k,
        DEFAULT_EXACT_UP_TO[key] if exact_up_to is None else exact_up_to,
    )


def _make_solver(
    hard: bool,
    lists: str,
    policy: str,
    heuristic: str,
    opener: str,
    top_k: int | None = None,
    second_top_k: int | None = None,
    exact_up_to: int | None = None,
) -> WordleSolver:
    """The configured solver, or a clean exit with the reason (bad lists, unknown opener, bad option)."""
    from envs.wordle_rules import WordListError
    from planning.wordle.solver import SolverConfig, WordleSolver

    mode = "hard" if hard else "easy"
    top_k, second_top_k, exact_up_to = _search_sizes(mode, top_k, second_top_k, exact_up_to)
    config = SolverConfig(
        mode=mode,
        policy=policy,
        heuristic=heuristic,
        opener=_opener(opener),
        lists=lists,
        top_k=top_k,
        second_top_k=second_top_k,
        exact_up_to=exact_up_to,
    )
    try:
        solver = WordleSolver(config)
    except (WordListError, ValueError) as exc:
        _fail(exc)
    load = solver.table_load
    if load.write_error is not None:
        typer.echo(
            f"note: built the pattern table in {load.seconds:.0f} s but could not cache it at {load.path} "
            f"({load.write_error}); it will be built again next time (set ROLLOUTLAB_CACHE to a writable directory)",
            err=True,
        )
    return solver


def _fail(exc: Exception) -> NoReturn:
    """Exit with status 2 and the reason; the --opener hint only when the opener is what is wrong."""
    from planning.wordle.solver import UnknownOpenerError

    # A list error can also say "not in the allowed list" (an answer missing from the guesses): match the type.
    hint = " (pass --opener none or an allowed word)" if isinstance(exc, UnknownOpenerError) else ""
    typer.echo(f"error: {exc}{hint}", err=True)
    raise typer.Exit(code=2) from None


def _opener(value: str) -> str | None:
    """The ``--opener`` value: ``None`` for ``none``, ``auto``, or a word of the letters a-z (else a clean exit)."""
    if value.strip().lower() in ("none", "auto"):
        return None if value.strip().lower() == "none" else "auto"
    return _word(value, "--opener")


def _word(value: str, what: str) -> str:
    """``value`` as a lower-case word of the letters a-z, or exit 2 saying why (``what`` names the argument)."""
    from planning.wordle.assistant import InputError, normalise_word

    try:
        return normalise_word(value)
    except InputError as exc:
        typer.echo(f"error: {what}: {exc}", err=True)
        raise typer.Exit(code=2) from None


@app.command()
def play(
    hard: _Hard = False,
    lists: _Lists = "original",
    policy: _Policy = "rollout",
    heuristic: _Heuristic = "gep",
    top_k: _TopK = None,
    second_top_k: _SecondTopK = None,
    opener: _AssistantOpener = "salet",
    exact_up_to: _ExactUpTo = None,
    book: _Book = True,
    alternatives: _Alternatives = 5,
) -> None:
    """Assistant for a real game: suggests guesses, reads back what you played and the colours you got."""
    from planning.wordle.assistant import Assistant

    solver = _make_solver(hard, lists, policy, heuristic, opener, top_k, second_top_k, exact_up_to)
    try:
        Assistant(solver, typer.echo, n_alternatives=alternatives, use_book=book).run(input)
    except KeyboardInterrupt:
        # Ctrl-C is not a clean end like quit or end of input: exit 128 + SIGINT, the shell's convention.
        typer.echo("\nInterrupted.", err=True)
        raise typer.Exit(code=130) from None


@app.command()
def serve(
    hard: _Hard = False,
    lists: _Lists = "original",
    policy: _Policy = "rollout",
    heuristic: _Heuristic = "gep",
    top_k: _TopK = None,
    second_top_k: _SecondTopK = None,
    opener: _AssistantOpener = "salet",
    exact_up_to: _ExactUpTo = None,
    book: _Book = True,
    alternatives: _Alternatives = 5,
    host: Annotated[str, typer.Option(help="Address to listen on (the default is this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
) -> None:
    """The assistant on a local web page: type guesses, click tiles to set the colours, read the coach."""
    import webbrowser

    from werkzeug.serving import make_server

    from planning.wordle.web import ListenError, WebGame, create_app, listen_socket

    solver = _make_solver(hard, lists, policy, heuristic, opener, top_k, second_top_k, exact_up_to)
    app_ = create_app(WebGame(solver, n_alternatives=alternatives, use_book=book))
    try:
        sock = listen_socket(host, port)
    except ListenError as exc:  # address not on this machine, port in use, no permission: a usage error
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    with sock:  # werkzeug serves on its own duplicate of the socket
        server = make_server(host, port, app_, threaded=True, fd=sock.fileno())
    url = f"http://{host if ':' not in host else f'[{host}]'}:{server.port}/"
    typer.echo(f"Wordle assistant on {url} ({solver.config.mode} mode, lists: {solver.lists.name}); Ctrl-C stops it.")
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo("note: listening beyond this machine; anyone who can reach it plays the same game.", err=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        typer.echo("\nStopped.")
    finally:
        server.server_close()


@app.command()
def solve(
    word: Annotated[str, typer.Argument(help="The answer to play against.")],
    hard: _Hard = False,
    opener: Annotated[str, typer.Option(help="First guess: a word, auto, or none.")] = "salet",
    lists: _Lists = "original",
    policy: _Policy = "rollout",
    heuristic: _Heuristic = "gep",
    top_k: _TopK = None,
    second_top_k: _SecondTopK = None,
    exact_up_to: _ExactUpTo = None,
) -> None:
    """Play against a known answer and print the coloured board."""
    from planning.wordle.assistant import squares

    answer = _word(word, "WORD")
    solver = _make_solver(hard, lists, policy, heuristic, opener, top_k, second_top_k, exact_up_to)
    solver.show_progress = True  # `--opener auto` values every candidate opener first
    try:
        moves = solver.play(answer)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    for guess, colours in moves:
        typer.echo(f"{guess.upper()} {squares(colours)}")
    limit = solver.config.max_guesses
    verdict = f"solved in {len(moves)}" if len(moves) <= limit else f"FAILED: {len(moves)} guesses (> {limit})"
    typer.echo(verdict)


@app.command()
def bench(
    mode: Annotated[str, typer.Option(help="easy or hard.")] = "easy",
    policy: Annotated[str, typer.Option(help="greedy or rollout.")] = "rollout",
    heuristic: Annotated[str, typer.Option(help="mig, mrd, gep or minimax.")] = "gep",
    top_k: _TopK = None,
    second_top_k: _SecondTopK = None,
    opener: Annotated[
        str, typer.Option(help="First guess: a word, auto (rollout over top-k openers) or none.")
    ] = "salet",
    lists: Annotated[str, typer.Option(help=_LISTS_HELP)] = "original",
    guesses: Annotated[str, typer.Option(help="all allowed words, or only answers, as guesses.")] = "all",
    candidate_tiebreak: Annotated[
        bool, typer.Option(help="Break ties toward possible answers (off = the paper's plain greedy).")
    ] = True,
    exact_up_to: _ExactUpTo = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the result record here.", callback=output_file_option)
    ] = None,
) -> None:
    """Evaluate a policy exactly over every answer; print the result and optionally write JSON."""
    import json

    from envs.wordle_rules import WordListError
    from planning.wordle.evaluation import REQUIRED_KEYS, run_benchmark
    from planning.wordle.solver import SolverConfig

    top_k, second_top_k, exact_up_to = _search_sizes(mode, top_k, second_top_k, exact_up_to)
    config = SolverConfig(
        mode=mode,
        policy=policy,
        heuristic=heuristic,
        opener=_opener(opener),
        lists=lists,
        guesses=guesses,
        candidate_tiebreak=candidate_tiebreak,
        top_k=top_k,
        second_top_k=second_top_k,
        exact_up_to=exact_up_to,
    )
    try:
        record = run_benchmark(config, show_progress=True)
    except (WordListError, ValueError) as exc:
        _fail(exc)
    summary = {k: record[k] for k in REQUIRED_KEYS}
    if record["opener_search"]:
        summary["opener_search"] = record["opener_search"]
    typer.echo(json.dumps(summary))
    if json_path is not None:
        from rolloutlab.checkpoint import atomic_write_json

        atomic_write_json(json_path, record)
        typer.echo(f"wrote {json_path}")


def _size(n: int) -> str:
    return f"{n:,} bytes, {n / 2**20:.1f} MiB"


@cache_app.command("info")
def cache_info() -> None:
    """List the cache's files (pattern tables, second-move books) with their sizes, and where they are."""
    from planning.wordle.assistant import count
    from planning.wordle.cache import cache_files
    from planning.wordle.table import cache_dir

    folder = cache_dir()
    if not folder.is_dir():
        typer.echo(f"no cache directory at {folder} (nothing cached yet)")
        return
    files = cache_files(folder)
    for entry in files:
        typer.echo(f"  {entry.size:>14,}  {entry.path.name}")
    typer.echo(f"{folder}: {count(len(files), 'file')}, {_size(sum(entry.size for entry in files))}")


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete the cache's files; they are rebuilt when next needed. Other files in the directory are kept."""
    from planning.wordle.assistant import count
    from planning.wordle.cache import clear_cache
    from planning.wordle.table import cache_dir

    folder = cache_dir()
    if not folder.is_dir():
        typer.echo(f"no cache directory at {folder}: nothing to delete")
        return
    deleted, failed = clear_cache(folder)
    for entry in deleted:
        typer.echo(f"  deleted {entry.path.name} ({entry.size:,} bytes)")
    if deleted:
        total = sum(entry.size for entry in deleted)
        typer.echo(f"deleted {count(len(deleted), 'file')} ({_size(total)}) from {folder}")
    elif not failed:
        typer.echo(f"nothing to delete in {folder}")
    for entry, exc in failed:
        typer.echo(f"error: could not delete {entry.path}: {exc.strerror or exc}", err=True)
    if failed:
        raise typer.Exit(code=1)
