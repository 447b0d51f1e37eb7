"""Probe trained T-maze agents for attention collapse: at the junction step, how much attention lands on the cue step?

For each checkpoint, 40 corridors (cue up or down) are encoded in one pass. Per head, the script reports the mean
attention weight from the junction step to step 0 (uniform attention would be ``1 / (L + 1)``), plus the norm of the
difference in junction features between the two cues and the critic's Q-values per cue. A collapsed agent puts zero
attention on step 0, so the cue cannot reach its features.

    R=runs/incontext-bench
    OMP_NUM_THREADS=1 python experiments/incontext/attention_probe.py --checkpoints \
        $R/tmaze_no_sigma_reparam/agent_L50 $R/tmaze_no_sigma_reparam/agent_L50_seed1 \
        $R/tmaze_no_sigma_reparam/agent_L50_seed2 $R/tmaze/agent_L50 $R/tmaze/agent_L50_seed1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

from meta.incontext.sequence import TransformerTrajEncoder, sinusoidal_positions
from meta.incontext.tasks import make_task_env
from meta.incontext.trainer import load_agent
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads


@dataclass
class Args:
    checkpoints: list[str] = field(default_factory=list)
    """Run directories holding a T-maze ``checkpoint.pt`` (Transformer encoder)."""
    corridors: int = 40
    """Corridors encoded per checkpoint (cue drawn per corridor)."""
    out: str = str(Path(__file__).parent / "results" / "attention_probe.json")
    """Where the JSON goes."""


def probe(run_dir: Path, n: int) -> dict[str, Any]:
    agent, cfg = load_agent(run_dir / "checkpoint.pt")
    agent.eval()
    length = cfg.corridor_length
    cues, sequences = [], []
    for seed in range(n):
        env = make_task_env("tmaze", corridor_length=length, time_input=cfg.time_input)
        obs, _ = env.reset(seed=seed)
        cues.append(float(obs[0]))
        steps = [obs] + [env.step(0)[0] for _ in range(length)]
        sequences.append(np.stack(steps))
    x = torch.tensor(np.stack(sequences), dtype=torch.float32)
    cue = np.asarray(cues)
    encoder = agent.traj_encoder
    assert isinstance(encoder, TransformerTrajEncoder), "the probe reads Transformer attention"
    with torch.no_grad():
        features = agent.encode(x)[0][:, length]  # the junction step
        q = agent.q_values(features).mean(1)[:, -1]  # critic-ensemble mean, last discount: (B, A)
        # First block's attention, recomputed from its own projections (same input as in encode()).
        block = encoder.blocks[0]
        h = agent.timestep_encoder(x) + sinusoidal_positions(torch.arange(length + 1), agent.config.d_model)
        attn = block.attn
        qkv = attn.qkv(block.norm1(h)).view(n, length + 1, 3, attn.n_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(qkv[0] @ qkv[1].transpose(-1, -2) / attn.head_dim**0.5, dim=-1)
    up, down = cue == 1.0, cue == -1.0
    return {
        "corridor_length": length,
        "sigma_reparam": cfg.agent.sigma_reparam,
        "attention_junction_to_cue_per_head": weights[:, :, length, 0].mean(0).tolist(),
        "uniform_attention": 1.0 / (length + 1),
        "junction_feature_difference_between_cues": float((features[up].mean(0) - features[down].mean(0)).norm()),
        "junction_feature_norm": float(features.norm(dim=-1).mean()),
        "q_per_cue": {"up": q[up].mean(0).tolist(), "down": q[down].mean(0).tolist()},
    }


def main(args: Args) -> None:
    set_torch_threads(1)
    results = {run: probe(Path(run), args.corridors) for run in args.checkpoints}
    for run, r in results.items():
        print(
            run,
            [round(a, 3) for a in r["attention_junction_to_cue_per_head"]],
            round(r["junction_feature_difference_between_cues"], 3),
        )
    atomic_write_json(Path(args.out), {"args": vars(args), "runs": results})


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
