"""Word-list validation: every rule rejected with the line number and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.wordle_rules import WordListError, load_word_lists, make_word_lists


@pytest.mark.parametrize(
    ("answers", "allowed", "message"),
    [
        ("crane\nCrane\n", "crane\n", "answers, line 2: 'Crane' must be lowercase letters a-z only"),
        ("crane\ncran\n", "crane\n", "answers, line 2: 'cran' has 4 letters, the list uses 5"),
        ("crane\n\nslate\n", "crane\n", "answers, line 2: blank line"),
        ("crane\ncrane\n", "crane\n", "answers, line 2: 'crane' repeats line 1"),
        ("crane\n", "crane\nslate\nsl4te\n", "allowed, line 3: 'sl4te' must be lowercase letters a-z only"),
        ("crane\n", "crane\nslates\n", "allowed, line 2: 'slates' has 6 letters, the list uses 5"),
        ("crane\nslate\n", "crane\n", "answers, line 2: 'slate' is not in the allowed list"),
        ("a\n", "a\n", "answers, line 1: 'a' is shorter than 2 letters"),
        ("", "crane\n", "the list is empty"),
        ("crane \n", "crane\n", "line 1: 'crane ' has surrounding whitespace"),
        ("crâne\n", "crane\n", "line 1: 'crâne' must be lowercase letters a-z only"),
    ],
)
def test_bad_lists_are_rejected_with_line_and_reason(answers: str, allowed: str, message: str) -> None:
    with pytest.raises(WordListError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_word_lists(answers, allowed)


def test_good_custom_lists_any_length(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("ox\nax\n")
    (tmp_path / "b.txt").write_text("ax\nox\nxi\n")
    lists = load_word_lists(f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}")
    assert lists.length == 2 and lists.answers == ("ox", "ax")
    assert lists.answer_rows().tolist() == [1, 0]


def test_bad_spec_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WordListError, match="ANSWERS_PATH,ALLOWED_PATH"):
        load_word_lists("nonsense")
    with pytest.raises(WordListError, match="cannot read"):
        load_word_lists(f"{tmp_path / 'nope.txt'},{tmp_path / 'nope2.txt'}")


def test_shipped_lists() -> None:
    original = load_word_lists("original")
    assert (len(original.answers), len(original.allowed)) == (2315, 12972)
    assert original.answers[:3] == ("cigar", "rebut", "sissy")
    nyt = load_word_lists("nyt")
    assert (len(nyt.answers), len(nyt.allowed)) == (2309, 14855)
    assert set(original.answers) - set(nyt.answers) == {"agora", "fibre", "lynch", "pupal", "slave", "wench"}


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    # Windows editors (Notepad's "UTF-8 with BOM") start the file with U+FEFF; it is an encoding mark, not a letter.
    (tmp_path / "a.txt").write_text("\ufeffcrane\nslate\n", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes("crane\r\nslate\r\ntrace\r\n".encode("utf-8-sig"))
    lists = load_word_lists(f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}")
    assert lists.answers == ("crane", "slate") and lists.allowed == ("crane", "slate", "trace")
