"""The TRL adapter with ``use_vllm=True`` on CPU. Server mode: TRL's own ``VLLMClient`` and ``VLLMGeneration`` talking
over HTTP to a local stand-in for ``vllm serve`` (``tests/local_vllm_server.py``) that serves the same tiny model, in
one process and in two (``slow``). Colocate mode: TRL's colocate branch on an in-process stand-in for ``vllm.LLM``.
What a GPU run with real vLLM adds is listed in docs/rlvr.md (vLLM section)."""

from __future__ import annotations

import itertools
import math
import os
import re
import socket
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import numpy as np
import torch
from datasets import Dataset
from local_vllm_server import LocalVLLMServer, patch_client_for_http, patch_colocate
from trl import GRPOConfig
from trl_vllm_data_parallel import TwoStages, tiny_model, varied_reward

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import AR3PO
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import AllocatingGRPOTrainer, set_temperature
from meta.rlvr.trl_vllm import importance_sampling_ratio, sampling_logps_rows, vllm_refusals

G = 4
REPO = Path(__file__).resolve().parents[2]


def _dataset() -> Dataset:
    tasks: list[Task] = make_prompt_set(4, np.random.default_rng(0), difficulties=[1])
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def _config(tmp_path: Path, base_url: str, **overrides: Any) -> GRPOConfig:
    settings: dict[str, Any] = dict(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=4 * G,
        num_generations=G,
        max_completion_length=6,
        max_steps=2,
        learning_rate=3e-2,
        loss_type="dapo",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=base_url,
        vllm_server_timeout=5.0,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LocalVLLMServer, str]]:
    patch_client_for_http(monkeypatch)
    local = LocalVLLMServer(tiny_model(), CharTokenizer().eos_token_id)
    url = local.start()
    try:
        yield local, url
    finally:
        local.stop()


@pytest.mark.parametrize(
    ("kwargs", "named"), [({"seed": 3}, "generation_kwargs['seed']=3"), ({"n": 2}, "generation_kwargs['n']=2")]
)
def test_unsupported_vllm_settings_are_refused_before_the_backend_starts(
    tmp_path: Path, server: tuple[LocalVLLMServer, str], kwargs: dict[str, Any], named: str
) -> None:
    local, url = server
    config = _config(tmp_path, url, generation_kwargs=kwargs)
    with pytest.raises(ValueError, match=re.escape(f"{named} with use_vllm=True")):
        AllocatingGRPOTrainer(
            model=tiny_model(),
            reward_funcs=[varied_reward],
            args=config,
            train_dataset=_dataset(),
            processing_class=CharTokenizer(),
            allocator=TwoStages([G] * 4, [0] * 4),
        )
    assert local.requests == []  # TRL's client never connected: the backend did not start
    assert vllm_refusals(_config(tmp_path, url, generation_kwargs={"max_tokens": 4})) == []
    assert vllm_refusals(_config(tmp_path, url, use_vllm=False, generation_kwargs=kwargs)) == []


def test_server_mode_one_request_per_stage_and_importance_sampling_keys(
    tmp_path: Path, server: tuple[LocalVLLMServer, str]
) -> None:
    local, url = server
    first, second = [1, 2, 3, 1], [2, 0, 1, 0]
    trainer = AllocatingGRPOTrainer(
        model=tiny_model(),
        reward_funcs=[varied_reward],
        args=_config(tmp_path, url),
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        allocator=TwoStages(first, second),
    )
    # The temperature reaches vLLM's sampling and the loss's log-probabilities alike, or the ratio below drifts.
    set_temperature(trainer, 0.7)
    batches: list[dict[str, Any]] = []
    build = trainer._build_batch

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = build(*args, **kwargs)
        batches.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in out.items()})
        return out

    trainer._build_batch = recording  # type: ignore[method-assign]
    trainer.train()

    # One batched /v1/completions request per stage, n=1, each prompt repeated as often as the allocator asked.
    requests = local.paths("/v1/completions")
    assert len(requests) == 2 * 2  # two stages in each of two steps
    for payload in requests:
        assert payload["n"] == 1 and payload["temperature"] == pytest.approx(0.7) and payload["logprobs"] == 0
    for step in range(2):
        stage0, stage1 = requests[2 * step], requests[2 * step + 1]
        assert len(stage0["prompt"]) == sum(first) and len(stage1["prompt"]) == sum(second)
        runs = [len(list(g)) for _, g in itertools.groupby(map(tuple, stage0["prompt"]))]
        assert runs == first
    assert trainer.last_batch["group_sizes"] == [a + b for a, b in zip(first, second, strict=True)]
    # Weights pushed once per optimizer step (before each step's first stage), never between stages.
    assert local.weight_loads == 2
    assert len(local.paths("/reset_prefix_cache")) == 2

    assert len(batches) == 2
    for batch in batches:
        mask = batch["completion_mask"].bool()
        sampling, old = batch["sampling_per_token_logps"], batch["old_per_token_logps"]
        assert sampling.shape == old.shape == batch["completion_ids"].shape
        assert batch["importance_sampling_ratio"].shape == (mask.shape[0], 1)  # TRL's default: sequence_mask
        # The server samples from the trainer's weights: vLLM's log-probabilities equal the policy's row by row
        # (a response paired with the wrong row, or weights not synced, would break this).
        assert torch.allclose(sampling[mask], old[mask], atol=1e-4)
        assert torch.allclose(
            batch["importance_sampling_ratio"], torch.ones_like(batch["importance_sampling_ratio"]), atol=1e-3
        )
    # The second step's responses were sampled after one update: from the initial weights they would differ.
    second_batch = batches[1]
    initial = tiny_model()
    mask = second_batch["completion_mask"].bool()
    ids = torch.cat([second_batch["prompt_ids"], second_batch["completion_ids"]], dim=1)
    attention = torch.cat([second_batch["prompt_mask"], second_batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logits = initial(ids, attention_mask=attention).logits[
            :, -ids.size(1) + second_batch["prompt_ids"].size(1) - 1 : -1
        ]
        before = torch.log_softmax(logits / 0.7, dim=-1).gather(-1, second_batch["completion_ids"].unsqueeze(-1))[
            ..., 0
        ]
    assert (before[mask] - second_batch["sampling_per_token_logps"][mask]).abs().max() > 1e-3
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 2  # TRL's sampling/* metrics, logged for every step as a plain GRPOTrainer logs them
    for entry in logged:
        assert entry["sampling/importance_sampling_ratio/mean"] == pytest.approx(1.0, abs=1e-3)
        assert entry["sampling/sampling_logp_difference/max"] < 1e-4


def test_reused_responses_train_without_a_correction_under_vllm(
    tmp_path: Path, server: tuple[LocalVLLMServer, str]
) -> None:
    # AR3PO injects a stored correct response into an all-wrong group; vLLM's log-probabilities of it are unknown.
    _, url = server
    prompts = list(_dataset()["prompt"])
    always, never = prompts[0], prompts[1]

    def correct(prompts: list[str], completions: list[str], trainer_state: Any, **kwargs: Any) -> list[float]:
        return [float(p == always or (p != never and trainer_state.global_step == 0)) for p in prompts]

    trainer = AllocatingGRPOTrainer(
        model=tiny_model(),
        reward_funcs=[correct],
        args=_config(tmp_path, url),
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        allocator=AR3PO(stage_size=1, max_stages=3),
    )
    batches: list[tuple[dict[str, Any], list[bool]]] = []
    build = trainer._build_batch

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = build(*args, **kwargs)
        batches.append((out, list(trainer.last_batch["reused"])))
        return out

    trainer._build_batch = recording  # type: ignore[method-assign]
    trainer.train()
    batch, reused = batches[-1]
    assert sum(reused) == 2  # the two prompts right at step 0 only
    mask = batch["completion_mask"].bool()
    sampling, old = batch["sampling_per_token_logps"], batch["old_per_token_logps"]
    ratio = batch["importance_sampling_ratio"]
    for row, was_reused in enumerate(reused):
        tokens = mask[row]
        if was_reused:
            assert torch.isnan(sampling[row][tokens]).all() and ratio[row].item() == 1.0
        else:
            assert torch.allclose(sampling[row][tokens], old[row][tokens], atol=1e-4)
    assert all(math.isfinite(e["loss"]) for e in trainer.state.log_history if "loss" in e)


def test_colocate_mode_one_generate_call_per_stage_with_the_policy_s_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TRL's colocate branch on an in-process stand-in for vllm.LLM (tests/local_vllm_server.py: LocalLLM).
    llm = patch_colocate(monkeypatch, tiny_model(), CharTokenizer().eos_token_id)
    first, second = [2, 1, 1, 3], [0, 2, 0, 0]
    config = _config(tmp_path, "", vllm_mode="colocate", vllm_server_base_url=None)
    trainer = AllocatingGRPOTrainer(
        model=tiny_model(),
        reward_funcs=[varied_reward],
        args=config,
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        allocator=TwoStages(first, second),
    )
    differences: list[float] = []
    build = trainer._build_batch

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = build(*args, **kwargs)
        mask = out["completion_mask"].bool()
        differences.append(float((out["sampling_per_token_logps"] - out["old_per_token_logps"])[mask].abs().max()))
        return out

    trainer._build_batch = recording  # type: ignore[method-assign]
    trainer.train()
    (engine,) = llm.instances
    assert [len(ids) for ids, _ in engine.calls] == [sum(first), sum(second)] * 2
    assert all(params.n == 1 and params.logprobs == 0 for _, params in engine.calls)
    runs = [len(list(g)) for _, g in itertools.groupby(map(tuple, engine.calls[0][0]))]
    assert runs == first
    assert engine.weight_syncs == 2  # one weight load per step
    assert len(differences) == 2 and max(differences) < 1e-4


def test_importance_sampling_ratio_modes_and_unscored_rows() -> None:
    class Stub:
        def __init__(self, mode: str, low: float | None, high: float | None) -> None:
            self.vllm_importance_sampling_mode = mode
            self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max = low, high
            self._metrics: dict[str, dict[str, list[float]]] = {"train": defaultdict(list)}
            self.accelerator = type("A", (), {"gather": staticmethod(lambda t: t.reshape(-1))})()

    old = torch.tensor([[0.0, -1.0, -2.0], [-1.0, -1.0, 0.0]])
    sampling = torch.tensor([[-0.5, math.nan, -2.0], sampling_logps_rows(None, 3)])  # row 2: a reused response
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    e = math.exp(0.5)
    token = importance_sampling_ratio(Stub("token_truncate", None, 1.5), old, sampling, mask)
    assert torch.allclose(token, torch.tensor([[1.5, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    masked = importance_sampling_ratio(Stub("token_mask", 0.5, 1.5), old, sampling, mask)
    assert torch.allclose(masked, torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    sequence = importance_sampling_ratio(Stub("sequence_truncate", 0.0, 3.0), old, sampling, mask)
    assert torch.allclose(sequence, torch.tensor([[e], [1.0]]))
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode='tis'"):
        importance_sampling_ratio(Stub("tis", None, None), old, sampling, mask)
    assert sampling_logps_rows([-0.1, None], 2)[0] == -0.1 and math.isnan(sampling_logps_rows([-0.1, None], 2)[1])
    with pytest.raises(ValueError, match="2 log-probabilities for a completion of 3 tokens"):
        sampling_logps_rows([-0.1, -0.2], 3)


@pytest.mark.slow  # two torch.distributed.run processes: over a minute on a loaded 2-core machine
def test_two_processes_send_one_request_per_stage_and_pair_every_rank_s_rows(
    tmp_path: Path, server: tuple[LocalVLLMServer, str]
) -> None:
    import trl_vllm_data_parallel as worker

    local, url = server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2"]
    command += ["--master_addr=127.0.0.1", f"--master_port={port}", str(REPO / "tests" / "trl_vllm_data_parallel.py")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [*command, url, str(tmp_path)], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]

    # TRL's main process sends each stage's rows of both ranks as one request (pad rows included: 3 + 3, then 1 + 1).
    requests = local.paths("/v1/completions")
    first, second = sum(worker.FIRST), sum(worker.SECOND)
    assert [len(p["prompt"]) for p in requests] == [first + 1, second + 1] * worker.STEPS
    assert all(p["n"] == 1 for p in requests)
    assert local.weight_loads == worker.STEPS  # the main process pushes, once per step
    # Each rank's batch pairs vLLM's log-probabilities with its own rows (TRL slices the broadcast answer per rank).
    for rank in ranks:
        assert len(rank["differences"]) == worker.STEPS and max(rank["differences"]) < 1e-4
    assert ranks[0]["rank_rows"][-1][1] == ranks[1]["rank_rows"][-1][0]  # rank 0 trains the first rows
    for name, value in ranks[0]["params"].items():
        assert torch.equal(value, ranks[1]["params"][name]), name
