"""When the colours rule out every listed answer, the assistant offers the extended list or every allowed word."""

from __future__ import annotations

from envs.wordle_rules import WordLists, feedback
from planning.wordle.assistant import Assistant
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import TableLoad


def _assistant(original: WordLists, original_table: TableLoad) -> tuple[Assistant, list[str]]:
    out: list[str] = []
    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    return Assistant(solver, out.append), out


def _colours(guess: str, answer: str) -> str:
    return "".join("byg"[c] for c in feedback(guess, answer))


def test_a_word_of_the_extended_list_is_offered_and_solved(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assert "abuzz" not in original.answers and "abuzz" in original.allowed
    assistant.handle("abuzz ggggg")
    offer = out[-1]
    assert "No answer in the original list gives" in offer and "`extend`" in offer and "ABUZZ" in offer
    assert "check the colours (nothing changed)" in offer and assistant.depth == 0
    assistant.handle("extend")
    assert any("Going on over the extended hidden list: 1 word fits" in line for line in out)
    assert "Solved in 1 guess!" in out[-1] and assistant.solved
    assistant.handle("undo")
    assert assistant.depth == 0 and not assistant.solved


def test_only_the_whole_allowed_list_fits(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assistant.handle("aahed ggggg")  # an allowed word on neither answer list
    assert "`extend all`" in out[-1] and "`extend`:" not in out[-1]
    assistant.handle("extend")
    assert "no word of the extended hidden list fits" in out[-1]
    assistant.handle("extend all")
    assert "Solved in 1 guess!" in out[-1]


def test_extend_without_a_ruled_out_position_explains_itself(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assistant.handle("extend")
    assert "there is none now" in out[-1]
    assistant.handle("abuzz ggggg")
    assistant.handle("salet bbbbb")  # a consistent move in between withdraws the offer
    assistant.handle("extend")
    assert "there is none now" in out[-1]


def test_a_whole_game_whose_answer_is_not_listed(original: WordLists, original_table: TableLoad) -> None:
    answer = "abash"  # on the extended hidden list, not among the original answers
    assert answer not in original.answers
    assistant, out = _assistant(original, original_table)
    assistant.handle(f"salet {_colours('salet', answer)}")
    extended = False
    for _ in range(6):
        if assistant.solved:
            break
        if "`extend`" in out[-1]:
            assistant.handle("extend")
            extended = True
            continue
        guess = assistant.solver.lists.allowed[assistant.solver.act(assistant.state.belief, assistant.depth)]
        assistant.handle(f"{guess} {_colours(guess, answer)}")
    assert extended and assistant.solved and assistant.state.history[-1][0] == answer
    assert "extended hidden list" in assistant.solver.lists.name
    depth = assistant.depth
    assistant.handle("undo")  # a move played over the extended list: undo stays over that list
    assert assistant.depth == depth - 1 and answer in [
        assistant.solver.lists.answers[i] for i in assistant.state.belief.candidates
    ]


def test_undo_past_an_extend_restores_the_list_in_force(original: WordLists, original_table: TableLoad) -> None:
    answer = "adieu"  # on the extended hidden list only: ABBEY's colours rule out every original answer
    assert answer not in original.answers
    assistant, out = _assistant(original, original_table)
    moves = [f"{word} {_colours(word, answer)}" for word in ("salet", "anger", "abbey")]
    assert moves == ["salet bybgb", "anger gbbgb", "abbey gbbgb"]
    for move in moves:
        assistant.handle(move)
    after_anger = assistant.state.belief.candidates.tolist()  # ABBEY was refused: still the position after ANGER
    assistant.handle("extend")
    assert "extended hidden list" in assistant.solver.lists.name and assistant.depth == 3
    assistant.handle("undo")  # back to the position after ANGER, over the original list as it was then
    assert assistant.depth == 2 and assistant.solver is assistant.first_solver
    assert assistant.state.belief.candidates.tolist() == after_anger
    assistant.handle("undo")
    assistant.handle("undo")
    assert assistant.depth == 0 and len(assistant.state.belief.candidates) == len(original.answers)
    assert "Suggested opener" in out[-1]
    for move in moves:  # played again, ABBEY is refused the same way, over the original list
        assistant.handle(move)
    assert out[-1].startswith("No answer in the original list gives") and "list list" not in out[-1]
    assistant.handle("extend")
    assistant.handle("undo")
    assert assistant.depth == 2 and assistant.solver is assistant.first_solver
