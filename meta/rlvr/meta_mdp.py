"""The RLVR meta-MDP: the meta-agent sets GRPO's responses per prompt G over a run with a fixed token budget.

The same meta-MDP as the rollout-length one (:mod:`meta.control.mdp`: one episode = one inner training run under a fixed
budget, one step = one decision on the knob, reward = the change of the inner learner's evaluated performance on a
fixed scale), with the compact GRPO trainer (:class:`meta.rlvr.trainers.grpo.GRPOTrainer`) as the inner learner:

* **Budget**: generated completion tokens. Phase t ends once the run has generated ``(t + 1) / phases`` of the budget
  (the step that crosses the mark finishes; its overshoot comes off the next phase), so every policy of G spends the
  same tokens: a larger G buys more responses per prompt and fewer GRPO steps. That is the trade-off the knob is for:
  with binary rewards a small group is often all-right or all-wrong and teaches nothing (GRPO's advantage is zero,
  Shao et al. 2024, eq. 3), a large one spends many tokens per prompt.
* **Knob**: G of a uniform allocator (:class:`meta.rlvr.allocators.Uniform`), chosen on a grid (``direct``) or moved
  one grid position (``step``: DOWN / NOOP / UP).
* **J**: greedy held-out accuracy after the phase; ``J_0`` is the warm start's own accuracy, measured (it does not
  depend on the meta-agent, so the meta-return still telescopes to ``(J_final - J_0) / reward_scale``).
* **Observation** (:data:`RLVR_FEATURE_NAMES`): remaining budget, G, held-out accuracy and its trend, the histogram of
  the phase's per-prompt solve rates (five bins: 0, (0, 1/3], (1/3, 2/3), [2/3, 1), 1), the fraction of zero-variance
  groups, the mean response length (over ``max_new_tokens``) and the mean sampled-token entropy.
* **Domain randomization**: each run draws a difficulty mix (Dirichlet weights over ``difficulties``), a learning
  rate (log-uniform in ``lr_range``) and its prompt sets, from the round's generator; the test protocol fixes a
  held-out mix instead (``mix``).

:class:`GroupSizeFeedback` turns a phase's step metrics into the feedback dict; the learned controller
(:class:`meta.rlvr.learned.LearnedGroupSize`) builds the same observation from the same dict inside the compact trainer
or TRL (:class:`meta.rlvr.learned.GroupSizeCallback`).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from gymnasium import spaces

from envs.reasoning import Task, make_prompt_set
from meta.control import Feedback
from meta.control.mdp import MetaEnv, MetaProblem
from meta.rlvr.allocators import Uniform
from meta.rlvr.lm.charlm import CharLMConfig, build_model, load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig

#: Names of the RLVR meta-observation's entries, in order.
RLVR_FEATURE_NAMES: tuple[str, ...] = (
    "budget_remaining",
    "g",
    "accuracy",
    "accuracy_trend",
    "solve_rate_none",
    "solve_rate_low",
    "solve_rate_mid",
    "solve_rate_high",
    "solve_rate_all",
    "zero_variance_fraction",
    "response_length",
    "token_entropy",
)
#: Every feature is clipped to this magnitude (the ``Box`` bound).
RLVR_CLIP = 10.0
#: The discriminator value of :attr:`RLVRMetaConfig.problem_kind`.
PROBLEM_KIND: Literal["rlvr_group_size"] = "rlvr_group_size"


@dataclass(frozen=True)
class GroupSizeActions:
    """How a meta-action changes G, on a grid of allowed group sizes.

    Args:
        kind: ``"direct"`` (the action is an index into ``grid``) or ``"step"`` (0 = DOWN, 1 = NOOP, 2 = UP: one grid
            position, clamped at the ends).
        grid: Allowed G, strictly increasing, each ``>= 2`` (a group of one has no spread to learn from).

    Raises:
        ValueError: an unknown kind or a bad grid.
    """

    kind: Literal["step", "direct"] = "direct"
    grid: tuple[int, ...] = (2, 4, 8, 16)

    def __post_init__(self) -> None:
        if self.kind not in ("step", "direct"):
            raise ValueError(f"action set must be 'step' or 'direct', got {self.kind!r}")
        grid = tuple(int(g) for g in self.grid)
        if not grid or grid[0] < 2 or any(b <= a for a, b in itertools.pairwise(grid)):
            raise ValueError(f"the G grid must be non-empty, strictly increasing and >= 2, got {list(self.grid)}")

    @property
    def n(self) -> int:
        """Number of actions."""
        return 3 if self.kind == "step" else len(self.grid)

    def space(self) -> spaces.Discrete:
        """The meta-env's action space."""
        return spaces.Discrete(self.n)

    def apply(self, g: int, action: int) -> int:
        """G after ``action`` when ``g`` (a grid value) is in force.

        Raises:
            ValueError: ``action`` not in ``range(n)`` or ``g`` off the grid (``step`` only).
        """
        action = int(action)
        if not 0 <= action < self.n:
            raise ValueError(f"invalid meta-action {action} for the {self.kind!r} action set ({self.n} actions)")
        if self.kind == "direct":
            return int(self.grid[action])
        if g not in self.grid:
            raise ValueError(f"G={g} is not on the grid {list(self.grid)}")
        index = min(max(self.grid.index(g) + action - 1, 0), len(self.grid) - 1)
        return int(self.grid[index])

    def name(self, action: int) -> str:
        """A readable name of ``action`` (``UP``, ``G=4``)."""
        return ("DOWN", "NOOP", "UP")[int(action)] if self.kind == "step" else f"G={self.grid[int(action)]}"


@dataclass
class RLVRMetaConfig:
    """The RLVR meta-MDP's settings.

    Attributes:
        problem_kind: Always ``"rlvr_group_size"``; tells this config from the rollout-length one in files.
        checkpoint: SFT warm start every inner run begins from (``rolloutlab rlvr sft``); ``None`` builds a fresh
            ``model`` (tests: it solves nothing, but every code path runs).
        model: The fresh model's :class:`~meta.rlvr.lm.charlm.CharLMConfig` fields (``checkpoint=None`` only).
        token_budget: Generated completion tokens per inner run (32k: about 270 steps of 8 prompts at G = 2, 35 at
            G = 16; a run of the warm start costs 5-15 s on one core).
        phases: Decisions per run (the meta-episode's horizon).
        prompts_per_step: Prompts per GRPO step.
        max_new_tokens: Most tokens per response.
        grid: The allowed G.
        action_set: ``"direct"`` or ``"step"`` (:class:`GroupSizeActions`).
        g_init: G before the first decision (on the grid).
        difficulties: Digits of the long operand the prompts mix.
        mix: A fixed difficulty mix (weights over ``difficulties``); ``None`` draws one per run (Dirichlet with
            ``mix_concentration``).
        mix_concentration: The Dirichlet's concentration (``> 0``).
        lr_range: Learning rates are drawn log-uniform from this range (equal ends fix it).
        minibatches: Optimizer steps per generated batch (the RLVR benchmark's 1).
        pool_size: Training prompts per run.
        held_out_size: Held-out prompts per run (same mix), for J (400: a standard error of about 0.025 on an
            accuracy near 0.5, the size of the differences G makes).
        reward_scale: The meta-reward is ``(J' - J) / reward_scale``. Held-out accuracy moves by 0.05-0.3 over a
            run, so 0.1 puts the meta-returns at about [-1, 3], the size a fresh Q-network's outputs can reach.
    """

    problem_kind: Literal["rlvr_group_size"] = PROBLEM_KIND
    checkpoint: str | None = "runs/rlvr/sft.pt"
    model: dict[str, Any] = field(default_factory=dict)
    token_budget: int = 32_000
    phases: int = 6
    prompts_per_step: int = 8
    max_new_tokens: int = 8
    grid: list[int] = field(default_factory=lambda: [2, 4, 8, 16])
    action_set: Literal["step", "direct"] = "direct"
    g_init: int = 8
    difficulties: list[int] = field(default_factory=lambda: [1, 2, 3])
    mix: list[float] | None = None
    mix_concentration: float = 1.0
    lr_range: list[float] = field(default_factory=lambda: [1.5e-4, 6e-4])
    minibatches: int = 1
    pool_size: int = 128
    held_out_size: int = 400
    reward_scale: float = 0.1

    def __post_init__(self) -> None:
        if self.problem_kind != PROBLEM_KIND:
            raise ValueError(f"problem_kind must be {PROBLEM_KIND!r}, got {self.problem_kind!r}")
        if self.phases < 1 or self.token_budget < self.phases:
            raise ValueError(f"need 1 <= phases <= token_budget, got {self.phases}, {self.token_budget}")
        actions = self.actions()
        if self.g_init not in actions.grid:
            raise ValueError(f"g_init={self.g_init} is not on the grid {self.grid}")
        bad_mix = self.mix is not None and (
            len(self.mix) != len(self.difficulties) or min(self.mix) < 0 or sum(self.mix) <= 0
        )
        if bad_mix:
            raise ValueError(f"mix must be non-negative weights, one per difficulty {self.difficulties}: {self.mix}")
        if not self.mix_concentration > 0:
            raise ValueError(f"mix_concentration must be > 0, got {self.mix_concentration}")
        if len(self.lr_range) != 2 or not 0 < self.lr_range[0] <= self.lr_range[1]:
            raise ValueError(f"lr_range must be [low, high] with 0 < low <= high, got {self.lr_range}")
        if not self.reward_scale > 0 or self.pool_size < 1 or self.held_out_size < 1:
            raise ValueError("need reward_scale > 0, pool_size >= 1 and held_out_size >= 1")
        GRPOConfig(prompts_per_step=self.prompts_per_step, max_new_tokens=self.max_new_tokens)  # refuses bad sizes

    @property
    def horizon(self) -> int:
        """Decisions per meta-episode."""
        return self.phases

    @property
    def phase_length(self) -> int:
        """Completion tokens per phase (the budget's share; the meta-training summary's inner "steps")."""
        return self.token_budget // self.phases

    def actions(self) -> GroupSizeActions:
        """The action set."""
        return GroupSizeActions(self.action_set, tuple(int(g) for g in self.grid))

    def feature_names(self) -> tuple[str, ...]:
        """The observation's feature names."""
        return RLVR_FEATURE_NAMES

    def observation_space(self) -> spaces.Box:
        """The meta-observation space."""
        return spaces.Box(-RLVR_CLIP, RLVR_CLIP, shape=(len(RLVR_FEATURE_NAMES),), dtype=np.float32)

    def problem(self, inner_factory: Any = None, sampler: Any = None) -> GroupSizeProblem:
        """The :class:`GroupSizeProblem` these settings describe (it takes no inner factory or sampler)."""
        if inner_factory is not None or sampler is not None:
            raise ValueError("the RLVR meta-MDP builds its own GRPO trainers: no inner_factory or sampler")
        return GroupSizeProblem(self)


# --- feedback and features --------------------------------------------------------------------------------------


def solve_rate_histogram(rates: Sequence[float]) -> list[float]:
    """Fractions of groups whose solve rate is 0, in (0, 1/3], in (1/3, 2/3), in [2/3, 1) and 1 (zeros if none)."""
    if not rates:
        return [0.0] * 5
    r = np.asarray(rates, dtype=float)
    eps = 1e-9
    bins = [
        r <= eps,
        (r > eps) & (r <= 1 / 3 + eps),
        (r > 1 / 3 + eps) & (r < 2 / 3 - eps),
        (r >= 2 / 3 - eps) & (r < 1 - eps),
        r >= 1 - eps,
    ]
    return [float(b.mean()) for b in bins]


class GroupSizeFeedback:
    """Accumulates one phase's step metrics into the feedback dict of the RLVR meta-MDP.

    Call :meth:`add` after every GRPO step with the step's per-group solve rates, its generated responses and
    completion tokens and its mean sampled-token entropy; :meth:`feedback` then gives the phase's dict (keys
    ``budget_fraction``, ``accuracy``, ``solve_rates`` (the histogram), ``zero_variance_fraction``,
    ``response_length``, ``token_entropy``, ``steps``) and starts the next phase.

    Args:
        max_new_tokens: Response lengths are reported as a fraction of this.
    """

    def __init__(self, max_new_tokens: int) -> None:
        self.max_new_tokens = int(max_new_tokens)
        self._clear()

    def _clear(self) -> None:
        self._rates: list[float] = []
        self._responses = 0
        self._tokens = 0
        self._entropy_sum = 0.0
        self._steps = 0

    def add(self, solve_rates: Sequence[float], responses: int, completion_tokens: int, entropy: float) -> None:
        """Record one GRPO step."""
        self._rates += [float(x) for x in solve_rates]
        self._responses += int(responses)
        self._tokens += int(completion_tokens)
        self._entropy_sum += float(entropy) * int(completion_tokens)
        self._steps += 1

    def feedback(self, budget_fraction: float, accuracy: float) -> dict[str, Any]:
        """The phase's feedback; resets the accumulators."""
        rates = self._rates
        out = {
            "budget_fraction": float(budget_fraction),
            "accuracy": float(accuracy),
            "solve_rates": solve_rate_histogram(rates),
            "zero_variance_fraction": float(np.mean([r in (0.0, 1.0) for r in rates])) if rates else 0.0,
            "response_length": self._tokens / max(self._responses, 1) / self.max_new_tokens,
            "token_entropy": self._entropy_sum / max(self._tokens, 1),
            "steps": self._steps,
        }
        self._clear()
        return out


def _finite(value: Any, default: float = 0.0) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def rlvr_featurize(feedback: Mapping[str, Any], g: int, j: float, j_prev: float, g_max: int) -> np.ndarray:
    """The RLVR meta-observation (:data:`RLVR_FEATURE_NAMES`) from a phase's feedback.

    Args:
        feedback: :meth:`GroupSizeFeedback.feedback`'s dict (missing or non-finite entries count as 0; before the
            first phase only ``budget_fraction`` is needed).
        g: The G in force.
        j: Held-out accuracy attributed to the last phase; ``j_prev`` the one before (for the trend).
        g_max: The grid's largest G (G is observed as ``g / g_max``).
    """
    budget_fraction = min(max(_finite(feedback.get("budget_fraction")), 0.0), 1.0)
    hist = list(feedback.get("solve_rates") or [0.0] * 5)
    if len(hist) != 5:
        raise ValueError(f"solve_rates must be the 5-bin histogram, got {hist}")
    # Accuracy moves by a few points per phase: the trend is scaled by 10 so that it is visible next to the rest.
    values = [
        1.0 - budget_fraction,
        g / g_max,
        j,
        10.0 * (j - j_prev),
        *(_finite(h) for h in hist),
        _finite(feedback.get("zero_variance_fraction")),
        _finite(feedback.get("response_length")),
        _finite(feedback.get("token_entropy")),
    ]
    return np.clip(np.asarray(values, dtype=np.float32), -RLVR_CLIP, RLVR_CLIP)


# --- the inner runs ---------------------------------------------------------------------------------------------


@dataclass
class RunDomain:
    """What one inner run was drawn with: difficulty mix, learning rate and seeds."""

    mix: list[float]
    lr: float
    data_seed: int
    seed: int

    def as_dict(self) -> dict[str, Any]:
        """Plain data for infos and histories."""
        return {"mix": list(self.mix), "lr": self.lr, "data_seed": self.data_seed, "seed": self.seed}


def draw_domains(cfg: RLVRMetaConfig, num_runs: int, rng: np.random.Generator) -> list[RunDomain]:
    """Each run's difficulty mix, learning rate and seeds, in a fixed order of draws from ``rng``."""
    domains = []
    low, high = math.log(cfg.lr_range[0]), math.log(cfg.lr_range[1])
    for _ in range(num_runs):
        if cfg.mix is None:
            mix = rng.dirichlet(np.full(len(cfg.difficulties), cfg.mix_concentration)).tolist()
        else:
            total = float(sum(cfg.mix))
            mix = [float(w) / total for w in cfg.mix]
        lr = float(math.exp(rng.uniform(low, high))) if high > low else float(cfg.lr_range[0])
        data_seed, seed = (int(x) for x in rng.integers(0, 2**31 - 1, size=2))
        domains.append(RunDomain(mix, lr, data_seed, seed))
    return domains


def run_prompt_sets(cfg: RLVRMetaConfig, domain: RunDomain) -> tuple[list[Task], list[Task]]:
    """A run's training pool and held-out set (same mix, disjoint draws)."""
    rng = np.random.default_rng(domain.data_seed)
    diffs = [int(d) for d in cfg.difficulties]
    pool = make_prompt_set(cfg.pool_size, rng, difficulties=diffs, weights=domain.mix)
    held_out = make_prompt_set(cfg.held_out_size, rng, difficulties=diffs, weights=domain.mix)
    return pool, held_out


class WarmStart:
    """The policy every inner run starts from: the SFT checkpoint, loaded once and copied per run."""

    def __init__(self, cfg: RLVRMetaConfig) -> None:
        self.checkpoint = cfg.checkpoint
        self.model_config = CharLMConfig(**cfg.model)
        self._state: dict[str, torch.Tensor] | None = None
        if cfg.checkpoint is not None:
            model, self.model_config, _ = load_model(cfg.checkpoint)
            self._state = copy.deepcopy(model.state_dict())

    def build(self, seed: int) -> torch.nn.Module:
        """A fresh copy (a fresh model initialized from ``seed`` when there is no checkpoint)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(self.model_config)
        if self._state is not None:
            model.load_state_dict(self._state)
        return model


def make_trainer(
    cfg: RLVRMetaConfig, domain: RunDomain, warm: WarmStart, allocator: Any = None
) -> tuple[GRPOTrainer, list[Task]]:
    """One inner run's trainer (uniform G = ``g_init`` unless ``allocator`` is given) and its held-out set."""
    pool, held_out = run_prompt_sets(cfg, domain)
    grpo = GRPOConfig(
        prompts_per_step=cfg.prompts_per_step,
        max_new_tokens=cfg.max_new_tokens,
        lr=domain.lr,
        minibatches=cfg.minibatches,
        seed=domain.seed,
    )
    vocab = CharVocab(warm.model_config.alphabet)
    trainer = GRPOTrainer(warm.build(domain.seed), vocab, pool, allocator or Uniform(cfg.g_init), grpo)
    return trainer, held_out


def spend_tokens(trainer: GRPOTrainer, until: float, tracker: GroupSizeFeedback) -> None:
    """Run GRPO steps until the trainer has generated ``until`` completion tokens (the crossing step finishes)."""
    while trainer.costs.completion_tokens < until:
        metrics = trainer.step()
        tracker.add(
            trainer.last_solve_rates,
            int(metrics["step_cost/responses"]),
            int(metrics["step_cost/completion_tokens"]),
            float(metrics["entropy"]),
        )


class GroupSizeProblem(MetaProblem):
    """B compact GRPO runs whose knob is the uniform group size G (see the module docstring).

    The B runs are independent trainers advanced one after another (the character model is small enough that one
    run's step is a few batched forward passes); each keeps its own generators, so run i's trajectory does not depend
    on the other runs of its round.

    Args:
        config: The settings.
    """

    def __init__(self, config: RLVRMetaConfig) -> None:
        self.config = config
        self.actions = config.actions()
        self.horizon = config.horizon
        self.reward_scale = float(config.reward_scale)
        self.observation_space = config.observation_space()
        self.g_max = max(config.grid)
        self.warm: WarmStart | None = None
        self.trainers: list[GRPOTrainer] = []
        self.held_out: list[list[Task]] = []
        self.domains: list[RunDomain] = []
        self.trackers: list[GroupSizeFeedback] = []
        self.g: list[int] = []

    def start(
        self, num_runs: int, rng: np.random.Generator, runs: range | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Draw the domains of all ``num_runs`` runs from ``rng`` and build the trainers of the runs ``runs``
        (default all); a run's domain carries its seeds, so run ``i`` is the same in any share of the round."""
        cfg = self.config
        if self.warm is None:
            self.warm = WarmStart(cfg)
        domains = draw_domains(cfg, num_runs, rng)
        self.domains = [domains[i] for i in (range(num_runs) if runs is None else runs)]
        self.trainers, self.held_out = [], []
        for domain in self.domains:
            trainer, held_out = make_trainer(cfg, domain, self.warm)
            self.trainers.append(trainer)
            self.held_out.append(held_out)
        self.trackers = [GroupSizeFeedback(cfg.max_new_tokens) for _ in self.domains]
        self.g = [int(cfg.g_init)] * len(self.domains)
        j0 = np.asarray([t.evaluate(h) for t, h in zip(self.trainers, self.held_out, strict=True)])
        start = {"budget_fraction": 0.0}
        obs = np.stack([rlvr_featurize(start, cfg.g_init, float(j), float(j), self.g_max) for j in j0])
        infos = [
            {"k": int(cfg.g_init), "domain": d.as_dict(), "j0": float(j)} for d, j in zip(self.domains, j0, strict=True)
        ]
        return obs, infos, j0

    def run_phase(self, actions: np.ndarray, t: int) -> tuple[list[Feedback], np.ndarray]:
        if not self.trainers:
            raise RuntimeError("call start() (reset) before step()")
        for a in actions:
            if not 0 <= int(a) < self.actions.n:
                raise ValueError(f"invalid meta-action {a!r} for the {self.actions.kind!r} action set")
        cfg = self.config
        until = (t + 1) * cfg.token_budget / cfg.phases
        feedback: list[Feedback] = []
        for i, (trainer, action) in enumerate(zip(self.trainers, actions, strict=True)):
            self.g[i] = self.actions.apply(self.g[i], int(action))
            allocator = trainer.allocator
            assert isinstance(allocator, Uniform)
            allocator.group_size = self.g[i]
            spend_tokens(trainer, until, self.trackers[i])
            accuracy = trainer.evaluate(self.held_out[i])
            spent = trainer.costs.completion_tokens / cfg.token_budget
            feedback.append(self.trackers[i].feedback(spent, accuracy))
        return feedback, np.asarray(self.g, dtype=np.int64)

    def performance(self, feedback: Feedback) -> float:
        return float(feedback.get("accuracy", np.nan))

    def observe(self, feedback: Feedback, knob: int, j: float, j_prev: float) -> np.ndarray:
        return rlvr_featurize(feedback, knob, j, j_prev, self.g_max)

    def episode_info(self, run: int) -> dict[str, Any]:
        return {
            "domain": self.domains[run].as_dict(),
            "completion_tokens": int(self.trainers[run].costs.completion_tokens),
            "grpo_steps": int(self.trainers[run].num_steps),
        }

    def close(self) -> None:
        self.trainers, self.held_out = [], []


class GroupSizeEnv(MetaEnv):
    """The RLVR meta-MDP as a gymnasium env (B = 1): :class:`meta.control.mdp.MetaEnv` over a :class:`GroupSizeProblem`.

    Args:
        config: The settings (default: :class:`RLVRMetaConfig`'s, which need the SFT checkpoint on disk).
    """

    def __init__(self, config: RLVRMetaConfig | None = None) -> None:
        self.config = config or RLVRMetaConfig()
        super().__init__(GroupSizeProblem(self.config))
