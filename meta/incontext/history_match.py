"""How many training tokens see the history they see when acting?

When acting, the agent reads a trial one step at a time through its KV cache, so the features of step ``t`` depend
on every step the cache still holds. A training window that starts mid-trial, or is shorter than the trial, computes
the features of some of its steps from a shorter history; their targets and gradients then describe inputs the acting
agent never sees. Windows cut short of whole trials matched on as little as 1-4 % of training tokens.

:func:`history_match` measures this numerically rather than from the attention mask: it cuts training windows the
trainer's way, encodes them the loss's way, replays each source trajectory step by step through the KV cache the
acting way, and counts the tokens whose features agree.
"""

from __future__ import annotations

import numpy as np
import torch

from meta.incontext.agent import InContextAgent
from meta.incontext.replay import TrajectoryReplay


@torch.no_grad()
def acting_features(agent: InContextAgent, obs: np.ndarray) -> torch.Tensor:
    """Sequence features ``(T + 1, d)`` of one trajectory's inputs ``obs`` ``(T + 1, D)``, encoded one step at a time
    through the encoder's incremental state, as :func:`~meta.incontext.trainer.run_rollouts` acts."""
    state = agent.init_state(1)
    out = []
    for row in torch.as_tensor(obs, dtype=torch.float32, device=agent.device):
        features, state = agent.encode(row[None, None, :], state)
        out.append(features[0, 0])
    return torch.stack(out)


@torch.no_grad()
def history_match(
    agent: InContextAgent,
    replay: TrajectoryReplay,
    batch_size: int,
    window: int,
    full_trials: bool,
    rng: np.random.Generator,
    atol: float = 1e-4,
) -> dict[str, float]:
    """Fraction of training tokens whose features equal their acting features (the visible history is the same).

    Samples ``batch_size`` windows as :meth:`~meta.incontext.trainer.InContextTrainer.update` does, encodes them as
    :meth:`~meta.incontext.agent.InContextAgent.loss` does (one pass from each window's absolute start) and compares
    every unpadded step, and the next-state input of the last one, with the same step of its whole trajectory read
    through the cache. Both passes run in eval mode, so only the history differs (a training-mode pass would also
    refine spectral norm's singular vectors).

    Args:
        agent: Any agent (trained or not; random weights already tell a short history from the full one).
        replay: Trajectories to cut windows from.
        batch_size: Windows.
        window: Window length (ignored with ``full_trials``).
        full_trials: Cut whole trials from step 0, as the trainer does with ``full_trials``.
        rng: Draws the trajectories and window starts.
        atol: Largest absolute feature difference that still counts as the same history.

    Returns:
        ``{"fraction": matched / tokens, "tokens": int, "max_abs_difference_matched": float}``.
    """
    was_training = agent.training
    agent.eval()
    indices = rng.integers(0, len(replay), size=batch_size)
    batch = replay.windows(indices, window, rng, full_trials).to(agent.device)
    train_features, _ = agent.encode(batch.obs, None, batch.start)
    matched = tokens = 0
    worst = 0.0
    for row, index in enumerate(indices):
        traj = replay.trajectories[int(index)]
        acting = acting_features(agent, traj.obs)
        n = int(batch.mask[row].sum())
        begin = int(batch.start[row])
        # Steps with an action, plus the next-state input after the last one (the TD target reads it too).
        diff = (train_features[row, : n + 1] - acting[begin : begin + n + 1]).abs().amax(dim=-1)
        same = diff <= atol
        matched += int(same.sum())
        tokens += n + 1
        if same.any():
            worst = max(worst, float(diff[same].max()))
    agent.train(was_training)
    return {"fraction": matched / max(tokens, 1), "tokens": tokens, "max_abs_difference_matched": worst}
