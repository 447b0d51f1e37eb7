"""``experiments/mbrl/speed_options_check.py``: the committed comparison is what the committed runs give."""

from __future__ import annotations

import json
from pathlib import Path

from script_modules import load_script

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "mbrl" / "results"


def test_the_committed_check_is_recomputed_from_the_committed_runs() -> None:
    script = load_script(RESULTS.parent / "speed_options_check.py")
    committed = json.loads((RESULTS / "speed_options_check.json").read_text())
    read = lambda name: json.loads((RESULTS / name).read_text())  # noqa: E731
    fast = read("sample_efficiency_Pendulum-v1_fast.json")
    assert script.pendulum_mbpo(read("sample_efficiency_Pendulum-v1.json"), fast) == committed["pendulum_mbpo"]
    assert (
        script.pendulum_mbpo(fast, read("sample_efficiency_Pendulum-v1_fast_bf16.json"))
        == committed["pendulum_mbpo_bf16"]
    )
    gate = script.dyna_gate(read("gate_8k_converged.json"), read("gate_8k_converged_batched.json"), seed=2, reps=2000)
    assert json.loads(json.dumps(gate)) == committed["dyna_gate_8k"]


def test_pairing_is_by_seed_and_the_verdict_follows_the_interval() -> None:
    script = load_script(RESULTS.parent / "speed_options_check.py")

    def entry(seeds: list[int], steps: list[int]) -> dict:
        return {
            "entry": {"seeds": seeds, "arms": {"mbpo:fixed:1": {"steps_to_threshold": steps}}},
            "settings": {"mbpo": {}},
        }

    same = script.pendulum_mbpo(entry([0, 1, 2], [500, 600, 700]), entry([2, 1, 0], [700, 600, 500]))
    assert same["median_difference"] == 0 and same["unchanged"] and same["options_steps"] == [500, 600, 700]
    slower = script.pendulum_mbpo(entry(list(range(8)), [500] * 8), entry(list(range(8)), [900] * 8))
    assert slower["median_difference"] == 400 and not slower["unchanged"]
