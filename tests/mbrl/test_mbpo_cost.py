"""``experiments/mbrl/mbpo_cost.py``'s summary: arms paired by seed against the baseline, the target judged on the
fast arm's median CPU ratio, and the part written into ``speed.json``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from script_modules import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "mbrl" / "mbpo_cost.py"


def _unit(arm: str, seed: int, cpu: float, steps: int = 1200) -> dict:
    per_1k = 1000.0 / steps
    return {
        "arm": arm,
        "seed": seed,
        "env_steps": steps,
        "cpu_s_per_1k_env_steps": cpu * per_1k,
        "wall_s_per_1k_env_steps": 1.1 * cpu * per_1k,
        "parts_cpu_s_per_1k_env_steps": {"sac_updates": 0.5 * cpu * per_1k, "model_fits": 0.3 * cpu * per_1k},
    }


def test_summary_pairs_arms_by_seed_and_judges_the_fast_arm(tmp_path: Path) -> None:
    script = load_script(SCRIPT)
    units = tmp_path / "units"
    units.mkdir()
    cpu = {("baseline", 0): 400.0, ("baseline", 1): 500.0, ("fast", 0): 200.0, ("fast", 1): 325.0}
    cpu[("default", 0)] = 380.0
    for (arm, seed), value in cpu.items():
        (units / f"{arm}__{seed}.json").write_text(json.dumps(_unit(arm, seed, value)))
    # A unit of another length is not paired with these.
    (units / "fast__2.json").write_text(json.dumps(_unit("fast", 2, 1.0, steps=300)))
    speed = tmp_path / "speed.json"
    speed.write_text(json.dumps({"parts": {"sac": {"met": True}}}))
    summary = script.summarize(1200, units, tmp_path / "mbpo_cost.json", speed)
    fast = summary["arms"]["fast"]["cpu_ratio_to_baseline"]
    assert fast["seeds"] == [0, 1] and np.allclose(fast["ratios"], [0.5, 0.65])
    assert abs(fast["median"] - 0.575) < 1e-12 and summary["met"]
    assert summary["arms"]["default"]["cpu_ratio_to_baseline"]["seeds"] == [0]
    written = json.loads(speed.read_text())["parts"]
    assert written["sac"] == {"met": True} and written["mbpo_end_to_end"]["met"] is True
    cpu[("fast", 1)] = 400.0
    (units / "fast__1.json").write_text(json.dumps(_unit("fast", 1, 400.0)))
    assert not script.summarize(1200, units, tmp_path / "mbpo_cost.json", speed)["met"]
