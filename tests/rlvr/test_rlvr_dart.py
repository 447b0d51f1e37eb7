"""DART (meta/rlvr/trainers/dart.py): specs, per-task counts, the staleness bound and truncated importance weights by
hand, exact resume, an ``rlvr train --dart`` run, and the same learner code over the in-process pool, local processes
and Ray actors (bit-identical with one worker)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tiny_grpo import TINY_LM, parity_reward

from envs.reasoning import make_prompt_set
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.lm.charlm import build_model
from meta.rlvr.lm.sampling import sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.dart import (
    DARTConfig,
    DARTCounts,
    DARTTrainer,
    _Ready,
    make_dart_config,
    staleness_filter,
    truncated_importance_weights,
)
from meta.rlvr.trainers.dart_workers import RolloutJob
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_loss import group_advantages


def _trainer(backend: str = "inline", workers: int = 1, **dart: Any) -> DARTTrainer:
    """2 prompts per step, 1 prompt per job, 2-4 responses per prompt, parity-of-length reward."""
    torch.manual_seed(0)
    pool = make_prompt_set(8, np.random.default_rng(0), difficulties=[1, 2])
    settings: dict[str, Any] = {"n_min": 2, "n_max": 4, "prompts_per_job": 1, "backend": backend, "workers": workers}
    cfg = DARTConfig(**{**settings, **dart})
    grpo = GRPOConfig(prompts_per_step=2, minibatches=2, lr=0.02)
    return DARTTrainer(build_model(TINY_LM), CharVocab(), pool, cfg, grpo, reward_fn=parity_reward)


def _params(trainer: DARTTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_specs_by_hand() -> None:
    assert make_dart_config("dart") == DARTConfig()
    cfg = make_dart_config("dart:2,3,6,2,ray")
    assert (cfg.max_staleness, cfg.n_min, cfg.n_max, cfg.workers, cfg.backend) == (2, 3, 6, 2, "ray")
    assert not cfg.synchronous
    sync = make_dart_config("dart_sync:4,8,1,inline", prompts_per_job=3)
    assert sync.synchronous and sync.max_staleness == 0 and sync.backend == "inline" and sync.prompts_per_job == 3
    for bad in (
        "dart:-1",
        "dart:1,1,4",
        "dart:1,4,2",
        "dart:1,4,8,0",
        "dart:1,2,3,4,5",
        "dart:x",
        "async:1",
        "dart:1,a",
    ):
        with pytest.raises(ValueError):
            make_dart_config(bad)


def test_counts_by_hand() -> None:
    stats = StatsTable(ema_rate=1.0)
    stats.update("easy", [1.0, 1.0, 1.0, 1.0, 0.0])  # EMA 0.8: at the threshold
    stats.update("hard", [1.0, 0.0])  # 0.5
    counts = DARTCounts(n_min=3, n_max=7, easy=0.8)
    assert counts.initial(["easy", "hard", "unseen"], stats) == [3, 7, 7]


def test_staleness_bound_by_hand() -> None:
    assert staleness_filter([5, 4, 3, 2], version=5, max_staleness=1) == [True, True, False, False]
    assert staleness_filter([5, 4, 3, 2], version=5, max_staleness=0) == [True, False, False, False]
    assert staleness_filter([], version=0, max_staleness=0) == []
    with pytest.raises(ValueError, match="ahead"):
        staleness_filter([6], version=5, max_staleness=1)


def test_truncated_importance_weights_by_hand() -> None:
    prox = torch.log(torch.tensor([0.5, 0.2, 0.3]))
    mu = torch.log(torch.tensor([0.25, 0.4, 0.3]))
    # π_prox/μ = 2, 0.5, 1; truncated at C = 1.5.
    assert truncated_importance_weights(prox, mu, 1.5).tolist() == pytest.approx([1.5, 0.5, 1.0])


def _trace(max_staleness: int) -> DARTTrainer:
    trainer = _trainer(max_staleness=max_staleness)
    trainer.step()
    trainer.step()
    return trainer


def test_stale_groups_are_dropped_and_counted_beyond_the_bound() -> None:
    """One worker, one prompt per job, two per step (in-process, so the sequence is exact). Step 1 (version 0) trains
    on jobs 0 and 1; job 2 was sampled at version 0 and comes back in step 2 (version 1): staleness 1. Bound 0 drops
    it and trains on jobs 3 and 4; bound 1 keeps it with importance weights and trains on jobs 2 and 3."""
    strict = _trace(max_staleness=0)
    assert strict.stale_groups == 1 and strict.corrected_responses == 0
    assert strict.costs.dropped_responses == strict.stale_responses > 0
    assert strict.costs.dropped_tokens == strict.stale_tokens > 0
    assert strict.costs.groups == 5  # jobs 0-4 returned; job 5 is in flight
    loose = _trace(max_staleness=1)
    assert loose.stale_groups == 0 and loose.stale_responses == 0 and loose.costs.dropped_responses == 0
    assert loose.corrected_responses == strict.stale_responses  # job 2's responses, kept with weights
    assert loose.costs.groups == 4  # jobs 0-3 returned; job 4 is in flight
    responses_before = loose.costs.responses
    loose.close()  # the job in flight still cost its tokens: booked on close
    assert loose.costs.groups == 5 and loose.costs.responses > responses_before


def test_stale_responses_get_truncated_weights_on_their_advantages() -> None:
    trainer = _trainer(max_staleness=2, is_cap=1.5)
    trainer.step()
    assert trainer.num_steps == 1
    task = trainer.tasks[0]
    prompt = trainer.vocab.encode(task.prompt, bos=True)
    tokens = [[5, 6, trainer.vocab.eos_id], [7, trainer.vocab.eos_id], [5, 5, 5, trainer.vocab.eos_id]]
    behaviour = [[-1.0, -2.0, -0.5], [-3.0, -0.1], [-2.0, -2.0, -2.0, -2.0]]
    rewards = [1.0, 0.0, 1.0]
    stale = _Ready(task, 0, tokens, rewards, behaviour)
    fresh = _Ready(task, 1, tokens, rewards, behaviour)
    (g_stale, g_fresh) = trainer._groups([stale, fresh])
    with torch.no_grad():
        prox, _ = sequence_logprobs(
            trainer.model, [prompt] * 3, tokens, trainer.vocab.pad_id, suppress=trainer.suppress
        )
    adv = group_advantages(rewards, "grpo")
    out = trainer._advantages(g_stale)
    for j, r in enumerate(g_stale.responses):
        expected = [min(math.exp(float(prox[j, t]) - behaviour[j][t]), 1.5) for t in range(len(tokens[j]))]
        assert r.is_weights == pytest.approx(expected, rel=1e-5)  # type: ignore[attr-defined]
        assert out[j] == pytest.approx([adv[j] * w for w in expected], rel=1e-5)
    assert trainer._advantages(g_fresh) == pytest.approx(adv)  # version = learner's: w = 1, the plain advantages


def test_synchronous_mode_trains_on_fresh_groups_only() -> None:
    trainer = _trainer(synchronous=True, max_staleness=0)
    for _ in range(2):
        metrics = trainer.step()
        assert metrics["async/mean_staleness"] == 0.0 and metrics["async/in_flight"] == 0
    assert trainer.stale_groups == 0 and trainer.corrected_responses == 0 and trainer.costs.groups == 4


def test_dart_trainer_resumes_exactly() -> None:
    """Checkpoints wait for the jobs in flight, so a snapshot holds everything; the straight run checkpoints at the
    same step (as GRPORun does at every checkpoint_every) and the two end bit-identical."""
    full = _trainer(max_staleness=1)
    full.step()
    full.state_dict()
    full.step()
    full.step()
    part = _trainer(max_staleness=1)
    part.step()
    state = part.state_dict()
    resumed = _trainer(max_staleness=1)
    resumed.load_state_dict(state)
    resumed.step()
    resumed.step()
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert full.costs == resumed.costs
    assert (full.stale_groups, full.corrected_responses) == (resumed.stale_groups, resumed.corrected_responses)
    with pytest.raises(ValueError, match="max_staleness"):
        _trainer(max_staleness=3).load_state_dict(state)


def test_rlvr_train_with_dart_spec(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from meta.rlvr.cli import app
    from meta.rlvr.trainers.sft import SFTConfig, train_sft

    sft = tmp_path / "sft.pt"
    cfg = SFTConfig(steps=3, batch_size=8, difficulties=[1], difficulty_weights=[1.0], eval_per_difficulty=2)
    train_sft(replace_model(cfg), sft, log=None)
    args = ["train", "--no-progress", "--checkpoint", str(sft), "--dart", "dart:1,2,4,1,inline", "--steps", "2"]
    args += ["--prompts-per-step", "2", "--eval-every", "1", "--out", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "dart" in run_dir.name
    header = (run_dir / "progress.csv").read_text().splitlines()[0].split(",")
    assert "async/idle_seconds" in header and "async/stale_responses" in header
    bad = CliRunner().invoke(app, [*args[:-2], "--out", str(tmp_path / "bad"), "--allocator", "dars:4,8"])
    assert bad.exit_code != 0 and "DART" in bad.output


def replace_model(cfg: Any) -> Any:
    from dataclasses import replace

    return replace(cfg, model=TINY_LM)


def test_local_processes_run_the_same_code_bit_identically() -> None:
    """One worker: the job sequence does not depend on timing, so processes give the in-process result exactly."""
    inline = _trainer("inline")
    process = _trainer("process")
    try:
        for _ in range(2):
            inline.step()
            metrics = process.step()
        assert metrics["async/idle_seconds"] >= 0.0
        assert all(torch.equal(p, q) for p, q in zip(_params(inline), _params(process), strict=True))
        assert inline.costs == process.costs
    finally:
        process.close()
    assert process.pool is None and process.costs.groups > inline.costs.groups  # the job in flight, booked


def test_ray_actors_run_the_same_code_bit_identically() -> None:
    """A short Ray run (< 30 s): the same learner over Ray actors ends where the in-process pool does."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray): DART's Ray backend is untested")
    import tiny_grpo

    # The actors import packages, not the tests' helper module: send the reward function by value.
    ray.cloudpickle.register_pickle_by_value(tiny_grpo)
    inline = _trainer("inline")
    remote = _trainer("ray")
    try:
        for _ in range(2):
            inline.step()
            remote.step()
        assert all(torch.equal(p, q) for p, q in zip(_params(inline), _params(remote), strict=True))
        assert inline.costs == remote.costs
    finally:
        remote.close()
    assert not ray.is_initialized()


def test_worker_runs_a_job_by_hand() -> None:
    from meta.rlvr.trainers.dart_workers import WorkerSpec

    trainer = _trainer()
    worker = WorkerSpec(trainer.model, trainer.vocab, parity_reward, 4, 1.0).build()
    job = RolloutJob(0, 0, 0, trainer.tasks[:2], [3, 2], seed=7)
    out = worker.run(job)
    assert [len(t) for t in out.tokens] == [3, 2] and out.version == 0
    for tokens, rewards, logps in zip(out.tokens, out.rewards, out.logps, strict=True):
        assert rewards == [float(len(trainer.vocab.decode(t)) % 2) for t in tokens]
        assert [len(lp) for lp in logps] == [len(t) for t in tokens]
        assert all(x <= 0.0 for lp in logps for x in lp)
    assert worker.run(job).tokens == out.tokens  # the job's seed fixes its draws
