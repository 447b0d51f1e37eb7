"""Write the results pages of the docs from the committed results: one command, no number typed by hand twice.

Every template under ``experiments/docs_templates/`` becomes the page at the same relative path under ``docs/``
(``docs_templates/results/mbrl.md`` -> ``docs/results/mbrl.md``, ``docs_templates/history.md`` -> ``docs/history.md``).
A template is markdown with two kinds of placeholder, each naming a committed file by its path from the repository
root:

- ``{{ include experiments/mbrl/results/gate.md }}``: the file's text (a table a benchmark script generated from its
  JSON), without its final newline;
- ``{{ json experiments/meta/results/rlvr_meta.json compact.prob_improvement_vs_best.point .2f }}``: one value of a
  JSON file, reached by a dotted key path (list items by index), formatted with a Python format spec; a spec ending in
  ``U`` (``.3fU``) writes negative numbers with the typographic minus.

``tests/test_docs_results.py`` renders every template into a temporary directory and checks that the committed pages
equal the output, so a page cannot drift from its JSON.

    python experiments/docs_results.py                # rewrite docs/results/*.md and docs/history.md
    python experiments/docs_results.py --out /tmp/x   # write the pages under /tmp/x instead (the test's use)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "experiments" / "docs_templates"
PLACEHOLDER = re.compile(r"\{\{ (include|json) ([^{}]+?) \}\}")


def _lookup(data: Any, key: str) -> Any:
    parts = key.split(".")
    i = 0
    while i < len(parts):
        if isinstance(data, list):
            data, i = data[int(parts[i])], i + 1
            continue
        # The longest run of parts that names a key: keys such as "gamma0.99" hold dots themselves.
        for j in range(len(parts), i, -1):
            name = ".".join(parts[i:j])
            if name in data:
                data, i = data[name], j
                break
        else:
            raise KeyError(parts[i])
    return data


def _json_value(args: str, root: Path) -> str:
    path, key, *spec = args.split()
    if len(spec) > 1:
        raise ValueError(f"json placeholder takes PATH KEY [FORMAT], got {args!r}")
    fmt = spec[0] if spec else ""
    unicode_minus = fmt.endswith("U")
    value = _lookup(json.loads((root / path).read_text()), key)
    text = format(value, fmt.removesuffix("U"))
    return text.replace("-", "−") if unicode_minus else text


def render(template: str, root: Path = ROOT) -> str:
    """``template`` with every placeholder replaced by what the file it names holds."""

    def replace(match: re.Match[str]) -> str:
        kind, args = match.group(1), match.group(2).strip()
        if kind == "include":
            return (root / args).read_text().rstrip("\n")
        return _json_value(args, root)

    return PLACEHOLDER.sub(replace, template)


def render_all(out: Path, templates: Path = TEMPLATES, root: Path = ROOT) -> list[Path]:
    """Render every template under ``templates`` to the same relative path under ``out``; returns the pages."""
    pages = []
    for template in sorted(templates.rglob("*.md")):
        page = out / template.relative_to(templates)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render(template.read_text(), root))
        pages.append(page)
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the pages go (default: docs/)")
    args = parser.parse_args()
    for page in render_all(args.out):
        print(page)


if __name__ == "__main__":
    main()
