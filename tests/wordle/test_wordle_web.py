"""`rolloutlab wordle serve`: the JSON API through Flask's test client, and the page in a real headless Chromium."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envs.wordle_rules import WordLists, feedback
from planning.wordle.cli import app
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import TableLoad
from planning.wordle.web import MAX_BODY, MAX_DEPTH, MAX_LINE, WebGame, create_app, describe_listen_error

ANSWER = "cigar"
REPO = Path(__file__).resolve().parents[2]


def _digits(guess: str, answer: str = ANSWER) -> str:
    return "".join(str(c) for c in feedback(guess, answer))


@pytest.fixture
def client(original: WordLists, original_table: TableLoad) -> Any:
    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    return create_app(WebGame(solver, use_book=False)).test_client()


def _post(client: Any, line: str) -> dict[str, Any]:
    response = client.post("/api/command", json={"line": line})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_the_page_and_the_opening_state(client: Any, original: WordLists) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert b'id="guess"' in page.data and b"//" not in page.data.replace(b"http-equiv", b"")  # nothing fetched
    reply = client.get("/api/state").get_json()
    state = reply["state"]
    assert state["opener"] == "salet" and state["board"] == [] and not state["solved"]
    assert len(state["remaining"]) == len(original.answers) and state["length"] == 5
    assert any("Wordle assistant (easy mode" in m for m in reply["messages"])


def test_a_move_updates_board_remaining_suggestion_and_coach(client: Any, original: WordLists) -> None:
    reply = _post(client, f"salet {_digits('salet')}")
    state = reply["state"]
    assert state["board"] == [{"word": "salet", "colours": list(feedback("salet", ANSWER))}]
    left = sorted(w for w in original.answers if feedback("salet", w) == feedback("salet", ANSWER))
    assert state["remaining"] == left and ANSWER in left
    assert state["suggestion"] and state["opener"] is None and state["can_undo"]
    totals = [alt["expected_total"] for alt in state["alternatives"]]
    assert totals == sorted(totals) and all(t >= 2.0 for t in totals)
    assert state["suggestion"] in {alt["word"] for alt in state["alternatives"]}
    assert len(reply["messages"]) == 1, reply["messages"]  # the page draws board and suggestion from the state
    assert reply["messages"][0].startswith("Coach:") and f"The colours left {len(left)} answers" in reply["messages"][0]


def test_bad_lines_change_nothing_and_bad_requests_are_refused(client: Any) -> None:
    before = client.get("/api/state").get_json()["state"]
    for line in ("salet 0100", "zzzzz 00000", "sa1et 01000", ""):
        reply = _post(client, line)
        assert reply["state"] == before, line
        assert reply["messages"], line
    assert "Not understood" in _post(client, "zzzzz 00000")["messages"][0]
    assert client.post("/api/command", data="salet 01000").status_code == 400  # not JSON
    assert client.post("/api/command", json={"line": 5}).status_code == 400
    assert client.post("/api/command", json=["salet"]).status_code == 400
    assert client.post("/api/command", json={"line": "x" * (MAX_LINE + 1)}).status_code == 400
    assert "keeps running" in _post(client, "quit")["messages"][0]
    assert client.get("/api/state").get_json()["state"] == before


def test_undo_new_why_and_the_fallback_offer(client: Any) -> None:
    _post(client, f"salet {_digits('salet')}")
    why = _post(client, "why crane")["messages"]
    assert len(why) == 1 and why[0].startswith("CRANE") and "answers on average" in why[0]
    assert _post(client, "undo")["state"]["board"] == []
    offer = _post(client, "abuzz 22222")  # ABUZZ is allowed but not an original answer
    assert offer["state"]["board"] == []
    fallbacks = {f["command"]: f for f in offer["state"]["fallbacks"]}
    assert fallbacks["extend"]["words"] == ["abuzz"] and fallbacks["extend"]["fits"] == 1
    solved = _post(client, "extend")["state"]
    assert solved["solved"] and solved["board"][0]["word"] == "abuzz" and solved["suggestion"] is None
    fresh = _post(client, "new")["state"]
    assert fresh["board"] == [] and fresh["opener"] == "salet" and fresh["fallbacks"] == []


def test_serve_refuses_a_port_in_use(original_table: TableLoad) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--policy", "greedy", "--port", str(port)])
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}: port {port} is in use" in result.output


def test_serve_names_an_address_that_is_not_on_this_machine(original_table: TableLoad) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
    result = CliRunner().invoke(app, ["serve", "--policy", "greedy", "--host", "192.0.2.1", "--port", "0"])
    assert result.exit_code == 2 and "192.0.2.1 is not an address of this machine" in result.output, result.output
    assert "in use" not in result.output and "--port" not in result.output


def test_a_bind_refused_for_lack_of_permission_says_so() -> None:
    import errno

    message = describe_listen_error("127.0.0.1", 80, PermissionError(errno.EACCES, "Permission denied"))
    assert "permission denied" in message and "--port of 1024 or more" in message and "in use" not in message


class _CountingStream:
    """A request body of ``size`` bytes that counts what the server reads of it."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n is None or n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b"[" * n

    def readline(self, n: int = -1) -> bytes:
        return self.read(n)


def test_a_huge_body_is_refused_before_it_is_read(client: Any) -> None:
    declared = _CountingStream(300 * 2**20)  # a 300 MB body, declared as such
    environ = {"wsgi.input": declared, "CONTENT_LENGTH": str(declared.size)}
    response = client.post("/api/command", content_type="application/json", environ_overrides=environ)
    assert response.status_code == 413 and "over" in response.get_json()["error"]
    assert declared.read_bytes == 0
    undeclared = _CountingStream(300 * 2**20)  # sent without a length: read only up to the limit
    environ = {"wsgi.input": undeclared, "CONTENT_LENGTH": "", "wsgi.input_terminated": True}
    response = client.post("/api/command", content_type="application/json", environ_overrides=environ)
    assert response.status_code == 413 and undeclared.read_bytes <= 2 * MAX_BODY, undeclared.read_bytes


def test_too_deep_json_is_refused_before_parsing(client: Any) -> None:
    deep = '{"line": ' + "[" * 5000 + "]" * 5000 + "}"
    assert len(deep) < MAX_BODY
    response = client.post("/api/command", data=deep, content_type="application/json")
    assert response.status_code == 400 and f"deeper than {MAX_DEPTH} levels" in response.get_json()["error"]
    assert client.post("/api/command", data="[" * 200_000, content_type="application/json").status_code == 413
    in_a_string = {"line": "[" * (MAX_DEPTH + 5) + " salet"}  # brackets inside a string are not nesting
    assert client.post("/api/command", json=in_a_string).status_code == 200


def test_a_reloaded_page_gets_the_last_messages_again(client: Any) -> None:
    reply = _post(client, f"salet {_digits('salet')}")
    assert reply["messages"][0].startswith("Coach:")
    assert client.get("/api/state").get_json()["messages"] == reply["messages"]


# --- the page in a real browser --------------------------------------------------------------------------------------


def _browser_or_skip() -> tuple[str, str]:
    binary = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    if binary and driver:
        return binary, driver
    log = REPO / ".browser-install.log"
    why = log.read_text().strip() if log.exists() else "scripts/install_browser.sh has not run"
    pytest.skip(
        f"no headless Chromium with chromedriver on PATH; `make browser` installs Debian's. Last attempt: {why}"
    )


@pytest.fixture
def page(original: WordLists, original_table: TableLoad) -> Iterator[Any]:
    """A served game and a headless Chromium on its page."""
    binary, driver_path = _browser_or_skip()
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the dev extras: pip install -e .[dev]")
    from selenium.webdriver.chrome.service import Service
    from werkzeug.serving import make_server

    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    server = make_server("127.0.0.1", 0, create_app(WebGame(solver, use_book=False)), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        browser.get(f"http://127.0.0.1:{server.server_port}/")
        yield browser
    finally:
        browser.quit()
        server.shutdown()
        thread.join(timeout=10)


def _wait(browser: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, 30).until(lambda b: condition(b), message=f"timed out waiting for {what}")


def _play(browser: Any, word: str) -> None:
    """Type ``word``, click each tile to its colour against the answer, press Enter; wait for the new board row."""
    from selenium.webdriver.common.by import By

    rows = len(browser.find_elements(By.CSS_SELECTOR, "#board .board-row"))
    box = browser.find_element(By.ID, "guess")
    box.clear()
    box.send_keys(word)
    for i, colour in enumerate(feedback(word, ANSWER)):
        for _ in range(colour):  # grey -> yellow -> green; each click redraws the tiles
            browser.find_element(By.ID, f"tile-{i}").click()
        tile = browser.find_element(By.ID, f"tile-{i}")
        assert tile.get_attribute("data-colour") == str(colour) and tile.text.lower() == word[i]
    browser.find_element(By.ID, "submit").click()
    _wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#board .board-row")) == rows + 1, f"{word}'s row")


def test_a_whole_game_in_headless_chromium(page: Any, original: WordLists) -> None:
    from selenium.webdriver.common.by import By

    browser = page
    _wait(browser, lambda b: "salet" in b.find_element(By.ID, "suggestion").text.lower(), "the opener")
    assert browser.find_element(By.ID, "remaining-title").text == f"{len(original.answers)} possible answers"

    _play(browser, "salet")
    row = browser.find_elements(By.CSS_SELECTOR, "#board .board-row")[0]
    classes = [t.get_attribute("class") for t in row.find_elements(By.CSS_SELECTOR, ".tile")]
    assert classes == [f"tile c{c}" for c in feedback("salet", ANSWER)]
    left = [w for w in original.answers if feedback("salet", w) == feedback("salet", ANSWER)]
    assert browser.find_element(By.ID, "remaining-title").text == f"{len(left)} possible answers"
    coach = browser.find_elements(By.CSS_SELECTOR, "#messages .coach")
    assert len(coach) == 1 and "SALET as an opener" in coach[0].text
    rows = browser.find_elements(By.CSS_SELECTOR, "#alternatives tbody tr")
    totals = [float(r.find_elements(By.TAG_NAME, "td")[1].text) for r in rows]
    assert rows and totals == sorted(totals)

    # `why`, then undo and redo the first move through the buttons.
    browser.find_element(By.ID, "why-word").send_keys("crane")
    browser.find_element(By.ID, "why").click()
    _wait(browser, lambda b: "CRANE" in b.find_element(By.ID, "messages").text, "the rating of CRANE")
    browser.find_element(By.ID, "undo").click()
    _wait(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, "#board .board-row"), "the undo")
    _play(browser, "salet")

    # Clicking an alternative fills the guess; then follow the suggestions to the answer.
    rows = browser.find_elements(By.CSS_SELECTOR, "#alternatives tbody tr")
    rows[0].click()
    assert browser.find_element(By.ID, "guess").get_attribute("value") == rows[0].get_attribute("data-word")
    for _ in range(5):
        if "Solved" in browser.find_element(By.ID, "suggestion").text:
            break
        browser.find_element(By.ID, "use-suggestion").click()
        _play(browser, browser.find_element(By.ID, "guess").get_attribute("value"))
    assert browser.find_element(By.ID, "suggestion").text == "Solved."
    assert "Solved in" in browser.find_element(By.ID, "messages").text
    assert browser.find_element(By.ID, "submit").get_attribute("disabled") is not None

    # A bad word: the assistant's message, and the board is unchanged.
    browser.find_element(By.ID, "new").click()
    _wait(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, "#board .board-row"), "the new game")
    box = browser.find_element(By.ID, "guess")
    box.send_keys("zzzzz")
    browser.find_element(By.ID, "submit").click()
    _wait(browser, lambda b: "not in the allowed word list" in b.find_element(By.ID, "messages").text, "the refusal")
    assert not browser.find_elements(By.CSS_SELECTOR, "#board .board-row")


def test_a_word_that_starts_like_a_command_is_played(client: Any) -> None:
    state = _post(client, f"whyda {_digits('whyda')}")["state"]
    assert state["board"] == [{"word": "whyda", "colours": list(feedback("whyda", ANSWER))}]


def test_the_api_refuses_letters_outside_a_to_z(client: Any) -> None:
    before = client.get("/api/state").get_json()["state"]
    for line in ("why \u017falet", "\u017falet 01000"):
        reply = _post(client, line)
        assert reply["state"] == before and "other than the letters A-Z" in reply["messages"][0], reply
