"""The results and history pages are what ``experiments/docs_results.py`` renders from the committed results."""

from __future__ import annotations

from pathlib import Path

from experiments.docs_results import TEMPLATES, render, render_all

ROOT = Path(__file__).resolve().parents[1]


def test_committed_pages_are_the_rendered_templates(tmp_path: Path) -> None:
    pages = render_all(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in pages} >= {
        f"results/{name}.md" for name in ("wordle", "mbrl", "mpc", "meta", "rlvr", "incontext")
    }
    for page in pages:
        committed = ROOT / "docs" / page.relative_to(tmp_path)
        assert committed.read_text() == page.read_text(), f"{committed} is stale: run experiments/docs_results.py"
    assert not any("{{" in p.read_text() for p in pages)


def test_placeholders_include_files_and_format_json_values(tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("| a |\n|---|\n| 1 |\n")
    (tmp_path / "r.json").write_text('{"x": {"ci": [-0.0361, 0.5]}}')
    text = "A\n{{ include t.md }}\nB {{ json r.json x.ci.0 .2fU }} {{ json r.json x.ci.1 +.1f }}"
    assert render(text, tmp_path) == "A\n| a |\n|---|\n| 1 |\nB −0.04 +0.5"
    assert TEMPLATES.is_dir()


def test_json_keys_may_hold_dots(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"q": {"gamma0.99": 1.5, "gamma0": {"9": 2.0}}, "a": [{"b.c": 3}]}')
    text = "{{ json r.json q.gamma0.99 .1f }} {{ json r.json q.gamma0.9 .1f }} {{ json r.json a.0.b.c d }}"
    assert render(text, tmp_path) == "1.5 2.0 3"
