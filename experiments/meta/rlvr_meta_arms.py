"""Paired test runs of the RLVR meta-MDP's arms: fixed G, the adaptive allocators, a random meta-policy and META.

Every arm of a test unit (one :class:`~meta.rlvr.meta_mdp.RunDomain`: difficulty mix, learning rate, prompt sets and
seed) starts from the same warm start with the same prompts, sampling generator and held-out set, and spends the
same completion-token budget in the same phases (:func:`~meta.rlvr.meta_mdp.spend_tokens`); only what sets the
responses per prompt differs. Held-out accuracy is measured at every phase mark, so each run's curve is accuracy
against tokens at the same points for every arm.

Arms (:func:`arm_names`): ``fixed:G`` (uniform G), the allocator benchmark's adaptive methods at their settings there
(``ar3po``, ``dars``, ``knapsack``, ``e3``: :data:`experiments.rlvr.allocator_benchmark.ARMS`), ``random`` (a
uniformly random meta-action at every decision, :class:`~meta.rlvr.learned.RandomGroupSize`) and ``meta`` (the
trained policy, :class:`~meta.rlvr.learned.LearnedGroupSize`). A controller arm decides before every phase from the
previous phase's feedback, exactly as the meta-env shows it to the agent.
"""

from __future__ import annotations

import time
from typing import Any

from meta.rlvr.allocators import Allocator, Uniform
from meta.rlvr.learned import GroupSizeController, LearnedGroupSize, RandomGroupSize
from meta.rlvr.meta_mdp import GroupSizeFeedback, RLVRMetaConfig, RunDomain, WarmStart, make_trainer, spend_tokens

#: The adaptive allocators compared, as in the allocator benchmark (their per-prompt budgets matched to G = 8).
ADAPTIVE_ARMS = ("ar3po", "dars", "knapsack", "e3")


def arm_names(grid: list[int] | tuple[int, ...], adaptive: tuple[str, ...] = ADAPTIVE_ARMS) -> list[str]:
    """The test arms: ``fixed:G`` for every G of the grid, the adaptive allocators, ``random`` and ``meta``."""
    return [f"fixed:{g}" for g in grid] + list(adaptive) + ["random", "meta"]


def _arm_parts(
    arm: str, cfg: RLVRMetaConfig, domain: RunDomain, policy: str | None
) -> tuple[Allocator, GroupSizeController | None]:
    from experiments.rlvr.allocator_benchmark import ARMS

    if arm.startswith("fixed:"):
        return Uniform(int(arm.split(":", 1)[1])), None
    if arm in ADAPTIVE_ARMS:
        return ARMS[arm](), None
    if arm == "random":
        # Seeded from the unit, so a random arm is paired too (and differs between units).
        return Uniform(cfg.g_init), RandomGroupSize(cfg, seed=domain.seed)
    if arm == "meta":
        if policy is None:
            raise ValueError("the meta arm needs the trained policy's path")
        return Uniform(cfg.g_init), LearnedGroupSize(policy)
    raise ValueError(f"unknown arm {arm!r}; expected fixed:G, one of {list(ADAPTIVE_ARMS)}, random or meta")


def run_arm(
    arm: str, cfg: RLVRMetaConfig, domain: RunDomain, warm: WarmStart, policy: str | None = None
) -> dict[str, Any]:
    """One test run of ``arm`` on ``domain``.

    Returns:
        ``{"arm", "domain", "curve": [{"tokens", "accuracy", "g"}] (phase marks, the first before any step),
        "final_accuracy", "g_schedule", "grpo_steps", "completion_tokens", "seconds"}``; ``g`` is the G chosen for
        the phase that follows (``None`` for the adaptive allocators).
    """
    start = time.perf_counter()
    allocator, controller = _arm_parts(arm, cfg, domain, policy)
    trainer, held_out = make_trainer(cfg, domain, warm, allocator)
    tracker = GroupSizeFeedback(cfg.max_new_tokens)
    accuracy = trainer.evaluate(held_out)
    feedback: dict[str, Any] = {"budget_fraction": 0.0, "accuracy": accuracy}
    curve: list[dict[str, Any]] = []
    schedule: list[int] = []
    if controller is not None:
        controller.reset()
    for t in range(cfg.phases):
        g: int | None = None
        if controller is not None:
            g = controller.decide(feedback)
            assert isinstance(allocator, Uniform)
            allocator.group_size = g
            schedule.append(g)
        elif isinstance(allocator, Uniform):
            g = allocator.group_size
        curve.append({"tokens": int(trainer.costs.completion_tokens), "accuracy": float(accuracy), "g": g})
        spend_tokens(trainer, (t + 1) * cfg.token_budget / cfg.phases, tracker)
        accuracy = trainer.evaluate(held_out)
        feedback = tracker.feedback(trainer.costs.completion_tokens / cfg.token_budget, accuracy)
    curve.append({"tokens": int(trainer.costs.completion_tokens), "accuracy": float(accuracy), "g": None})
    return {
        "arm": arm,
        "domain": domain.as_dict(),
        "curve": curve,
        "final_accuracy": float(accuracy),
        "g_schedule": schedule,
        "grpo_steps": int(trainer.num_steps),
        "completion_tokens": int(trainer.costs.completion_tokens),
        "seconds": time.perf_counter() - start,
    }


def tokens_to_target(run: dict[str, Any], target: float) -> float | None:
    """Completion tokens at the first phase mark where held-out accuracy reached ``target`` (``None``: never)."""
    for point in run["curve"]:
        if point["accuracy"] >= target:
            return float(point["tokens"])
    return None
