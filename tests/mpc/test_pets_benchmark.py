"""The PETS benchmark's bookkeeping: resumable runs, steps to threshold, MBPO/SAC references for the same seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.mbrl.pets_protocol import PETSSettings, collect_pets_runs, pets_config, summarize_env

SETTINGS = PETSSettings(env_id="Pendulum-v1", threshold=-200.0, budget=1000)


def _fake_run(arm: str, settings: PETSSettings, seed: int) -> dict:
    reach = {"pets_cem": [300, 500, None], "pets_mppi": [400, 400, 900]}[arm][seed]
    curve = [[s, -150.0 if reach is not None and s >= reach else -900.0] for s in range(100, (reach or 1000) + 1, 100)]
    return {
        "arm": arm,
        "seed": seed,
        "settings": json.loads(json.dumps(settings.__dict__)),
        "eval": curve,
        "steps_to_threshold": reach,
        "plan_ms_p50": 30.0 + seed,
        "plan_ms_p95": 45.0 + seed,
        "seconds": 10.0,
    }


def test_collect_resumes_and_refuses_other_settings(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []

    def run(arm: str, settings: PETSSettings, seed: int) -> dict:
        calls.append((arm, seed))
        return _fake_run(arm, settings, seed)

    first = collect_pets_runs(["pets_cem", "pets_mppi"], [0, 1, 2], SETTINGS, tmp_path, run=run)
    assert len(first) == 6 and len(calls) == 6
    (tmp_path / "pets_mppi__2.json").unlink()  # the run that was in progress when the benchmark was killed
    again = collect_pets_runs(["pets_cem", "pets_mppi"], [0, 1, 2], SETTINGS, tmp_path, run=run)
    assert calls[6:] == [("pets_mppi", 2)] and again == first
    other = PETSSettings(env_id="Pendulum-v1", threshold=-200.0, budget=2000)
    with pytest.raises(ValueError, match="other settings"):
        collect_pets_runs(["pets_cem"], [0], other, tmp_path, run=run)


def test_summary_medians_targets_and_references() -> None:
    records = [_fake_run(a, SETTINGS, s) for a in ("pets_cem", "pets_mppi") for s in range(3)]
    sac = [{"arm": "sac_utd1", "seed": s, "eval": [[100, -900.0], [3000, -150.0]]} for s in range(5)]
    mbpo = [{"arm": "mbpo:fixed:1", "seed": s, "eval": [[100, -900.0], [800, -190.0]]} for s in range(3)]
    entry = summarize_env(SETTINGS, records, sac + mbpo, reference_budget=10_000)
    cem = entry["pets_cem"]
    assert cem["steps_to_threshold"] == [300, 500, None] and cem["never_reached"] == 1
    assert cem["median_steps_to_threshold"] == 500.0 and cem["steps_met"] is True
    assert cem["plan_ms_p50"] == 31.0 and cem["plan_ms_met"] is True
    assert entry["pets_mppi"]["median_steps_to_threshold"] == 400.0
    assert entry["mbpo"]["arm"] == "mbpo:fixed:1" and entry["mbpo"]["median_steps_to_threshold"] == 800.0
    # Only the PETS seeds (0-2) of the five SAC runs count.
    assert entry["sac_utd1"]["steps_to_threshold"] == [3000, 3000, 3000]
    assert entry["seeds"] == [0, 1, 2] and entry["targets"]["median_steps_to_threshold"] == 1000


def test_config_lays_the_protocol_over_the_defaults() -> None:
    cfg = pets_config(
        PETSSettings(env_id="InvertedPendulum-v5", threshold=950.0, pets={"cem": {"population": 64}}), "pets_cem", 3
    )
    assert cfg.optimizer == "cem" and cfg.seed == 3 and cfg.stop_at_return == 950.0 and cfg.eval_every == 100
    assert cfg.cem.population == 64 and cfg.cem.iterations == 3  # one field overridden, the rest kept
    with pytest.raises(ValueError, match="unknown PETS arm"):
        pets_config(SETTINGS, "pets_adam", 0)


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "mbrl" / "results"


@pytest.mark.skipif(not (RESULTS / "pets.json").exists(), reason="the PETS benchmark has not been run")
def test_committed_pets_table_is_generated_from_its_json_and_quoted() -> None:
    from experiments.mbrl.pets_protocol import pets_table

    data = json.loads((RESULTS / "pets.json").read_text())
    table = (RESULTS / "pets.md").read_text()
    assert table == pets_table(data["envs"])
    assert table in (ROOT / "docs" / "results" / "mpc.md").read_text()
    for env_id, entry in data["envs"].items():
        runs = [r for r in data["runs"] if r["env"] == env_id]
        assert entry["seeds"] == sorted({r["seed"] for r in runs}) and env_id in data["commands"]


def test_mbpo_reference_reads_the_finished_runs_of_the_mbpo_protocol(tmp_path: Path) -> None:
    from experiments.mbrl.arms import PROTOCOL
    from experiments.mbrl.pets_protocol import mbpo_reference

    assert mbpo_reference(tmp_path, "Pendulum-v1") == ([], None)
    folder = tmp_path / "partial" / "Pendulum-v1"
    folder.mkdir(parents=True)
    for seed in (0, 1):
        record = {"arm": "sac_utd1", "seed": seed, "protocol": PROTOCOL, "settings": {"budget": 10_000}}
        (folder / f"sac_utd1__{seed}.json").write_text(json.dumps(record))
    (folder / "round_one.json").write_text(json.dumps({"arm": "sac_default", "seed": 0, "settings": {"budget": 5}}))
    runs, budget = mbpo_reference(tmp_path, "Pendulum-v1")
    assert [r["seed"] for r in runs] == [0, 1] and budget == 10_000  # round one's record is left out
    other = {"arm": "sac_utd1", "seed": 2, "protocol": PROTOCOL, "settings": {"budget": 20_000}}
    (folder / "sac_utd1__2.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="mixes budgets"):
        mbpo_reference(tmp_path, "Pendulum-v1")


@pytest.mark.slow
def test_quick_bench_reproduces_the_committed_first_seed(tmp_path: Path) -> None:
    """`rolloutlab bench --only mpc` at one seed is the benchmark's run: the committed seed-0 result of the float32
    planner (``pets_float32.json``, ~1 minute on an idle machine)."""
    from experiments.mbrl.pets_quick import quick_bench

    line, latency = quick_bench(tmp_path, seeds=(0,))
    assert latency.passed is None and latency.value is not None  # latency is reported, judged on an idle machine
    committed = next(
        r
        for r in json.loads((RESULTS / "pets_float32.json").read_text())["runs"]
        if r["env"] == "Pendulum-v1" and r["arm"] == "pets_cem" and r["seed"] == 0
    )
    assert line.pillar == "mpc" and line.value == committed["steps_to_threshold"]
    data = json.loads((tmp_path / "quick_pets.json").read_text())
    assert data["runs"][0]["eval"] == committed["eval"]
