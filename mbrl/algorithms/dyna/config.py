"""Dyna-DQN's settings: rl-zoo's tuned DQN hyperparameters per env family and :class:`DynaConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mbrl.models import ModelConfig

__all__ = ["ZOO_DQN", "DynaConfig", "dyna_model_config"]

#: rl-zoo's tuned DQN hyperparameters (rl-baselines3-zoo ``hyperparams/dqn.yml``); ``gradient_steps = -1`` means
#: "as many as env steps collected" (``train_freq``), as in SB3. ``target_update_interval`` is in env steps here, as in
#: rl-zoo; :meth:`DynaConfig.for_env` converts it to gradient steps.
ZOO_DQN: dict[str, dict[str, Any]] = {
    "MountainCar": {
        "learning_rate": 4e-3,
        "batch_size": 128,
        "buffer_size": 10_000,
        "learning_starts": 1000,
        "gamma": 0.98,
        "target_update_interval": 600,
        "train_freq": 16,
        "gradient_steps": 8,
        "exploration_fraction": 0.2,
        "exploration_final_eps": 0.07,
        "net_arch": [256, 256],
    },
    "Acrobot": {
        "learning_rate": 6.3e-4,
        "batch_size": 128,
        "buffer_size": 50_000,
        "learning_starts": 0,
        "gamma": 0.99,
        "target_update_interval": 250,
        "train_freq": 4,
        "gradient_steps": -1,
        "exploration_fraction": 0.12,
        "exploration_final_eps": 0.1,
        "net_arch": [256, 256],
    },
    "CartPole": {
        "learning_rate": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "gamma": 0.99,
        "target_update_interval": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04,
        "net_arch": [256, 256],
    },
}


def dyna_model_config() -> ModelConfig:
    """A smaller, faster ensemble than MBPO's default, sized for the low-dimensional classic-control tasks."""
    return ModelConfig(ensemble_size=5, num_elites=3, hidden_size=64, num_layers=3, batch_size=256)


@dataclass
class DynaConfig:
    """Dyna-DQN settings. DQN fields default to rl-zoo's Acrobot-v1 values; use :meth:`for_env` for other envs.

    Attributes:
        budget: Real env steps per run.
        phase_length: ``P``, env steps between rollout-length decisions (and greedy evaluations).
        k_cap: Largest rollout length a controller may ask for.
        model_train_freq: Env steps between world-model refits on the whole real buffer.
        rollout_freq: Env steps between rounds of imagined rollouts.
        num_model_rollouts: ``M``, imagined rollouts started per round (start states drawn from ``D`` without
            replacement while ``D`` holds enough states).
        model_retain_rounds: Rounds of imagined data the rolling model buffer keeps.
        real_ratio: Share of real transitions in each minibatch of a run that uses the model.
        model_gradient_steps: Extra updates per training round for a run that uses the model (on mixed batches) or is
            compute-matched (on real batches); ``-1``: as many as the round's ordinary updates.
        learning_rate: Adam learning rate.
        batch_size: Minibatch size.
        buffer_size: Capacity of the real replay buffer ``D`` (per run).
        learning_starts: Env steps of uniformly random actions before learning.
        gamma: Discount.
        target_update_interval: Gradient steps between hard target-network updates (per run), or env steps when
            ``target_clock == "env_steps"``.
        target_clock: ``"updates"`` syncs each run's target network every ``target_update_interval`` of its own
            gradient steps; ``"env_steps"`` syncs every run every ``target_update_interval`` env steps (SB3's DQN).
            The clock decides what extra updates buy: on the update clock a run that makes twice the updates also
            makes twice the target syncs, i.e. twice the sweeps of approximate value iteration, which on Acrobot is
            most of what extra updates give (``experiments/mbrl/gate.py``, ``results/gate_diagnosis.json``); on the
            env-step clock every arm makes the same number of sweeps, and extra updates only fit each target better.
        train_freq: Env steps between training rounds.
        gradient_steps: Ordinary updates per training round (-1: ``train_freq``).
        exploration_fraction: Fraction of the budget over which epsilon decays linearly.
        exploration_initial_eps: Starting epsilon.
        exploration_final_eps: Final epsilon.
        max_grad_norm: Per-run gradient-norm clip.
        net_arch: Hidden widths of the Q-network.
        model: World-model settings.
        eval_episodes: Greedy real episodes per run at the end of each phase (``mean_return`` and model errors).
        train_model_when_k0: Refit the model while ``K = 0`` too (the feedback then still reports model errors, and
            a later ``K > 0`` finds a fitted model).
        deterministic_rollouts: Imagined rollouts use the chosen elite's mean instead of sampling.
        multi_step_targets: Store each imagined transition as a multi-step one that runs to the end of its rollout
            (model-based value expansion, Feinberg et al. 2018; :meth:`mbrl.model_env.RolloutResult.multi_step`): a
            rollout of ``K`` steps then carries value ``K`` steps per backup instead of one, so ``K`` sets how far
            the model's rewards reach into the value targets.
        model_use: ``"dyna"`` trains on imagined rollouts of ``K`` steps (above); ``"lookahead"`` makes no imagined
            training data and instead acts (in training and in every evaluation) by a ``K``-step rollout of each
            action in the model under the greedy policy, closed by the Q-function
            (:meth:`mbrl.model_env.ModelEnv.lookahead_values`; Bertsekas 2019's rollout). Lookahead runs with
            ``K > 0`` make the extra updates on real data, so compute-matched K = 0 is their exact baseline: replay
            can stand in for imagined training data, but not for planning at the state the agent is in.
        lookahead_expectation: Lookahead steps with the elites' average prediction (PETS's "expectation"
            propagation) instead of the mean of one elite drawn at random per step: less noise in the rollout values,
            at the price of the elites' common bias.
        lookahead_trust: 0 (off), or act greedily on the Q-function instead of the lookahead's choice wherever the
            ensemble disagreement along the chosen action's rollout exceeds ``lookahead_trust`` times the run's
            latest ``disagreement_mean`` (along on-policy model episodes): look ahead only where the model is about
            as sure as it usually is.
        controller_feedback: What the end-of-phase feedback (what the rollout-length controller sees) is computed
            from. ``"evaluation"``: ``mean_return`` and the model errors come from the greedy evaluation episodes
            (:data:`mbrl.phases.FEEDBACK_KEYS`). ``"training"``: only from the run's training data, so that an arm
            scored by its evaluations cannot also be steered by them: ``mean_return`` is the mean return of the
            training episodes finished in the phase (NaN if none), the keys measured along evaluation episodes
            (``model_return_error``, ``model_length_error``, ``disagreement_mean``, ``disagreement_at_k``) are NaN,
            ``model_one_step_rmse`` is the model's one-step next-observation RMSE on the run's latest real
            transitions, and the evaluation's returns are kept apart in ``BatchedDynaDQN.last_evaluation``. The
            other keys of :data:`mbrl.phases.TRAINING_DATA_KEYS` (open-loop model errors, disagreement by rollout step,
            TD error on imagined data, the training-return trend) come from training data in both modes.
        batched_models: Fit the learned world models of all runs as one network with a run axis
            (:func:`mbrl.models.run_batched.fit_run_batched`) and step their lookahead together
            (:class:`mbrl.run_batched_env.RunBatchedModelEnv`), instead of one run after another: fewer, larger tensor
            ops. Each run keeps its own data, generator, early stopping and elites; the fits equal the per-run fits to
            float32 rounding (not always bit for bit: batched CPU kernels may round a run's slice differently, and
            early stopping can turn that into another stopping step), so runs agree with the per-run path in
            distribution, not run for run; hence off by default, the arithmetic of the committed results. Runs whose
            model is handed in (a simulator) or has a learned termination head are handled on their own either way.
        device: Where the Q-networks, their optimizer and the learned world models compute: ``cpu`` (the default,
            the tested path of every committed result), ``cuda``, ``cuda:N`` or ``auto``
            (:func:`rolloutlab.device.resolve_device`). Buffers, environments and every random draw stay on the CPU.
    """

    budget: int = 50_000
    phase_length: int = 5_000
    k_cap: int = 32
    model_train_freq: int = 1_000
    rollout_freq: int = 250
    num_model_rollouts: int = 1_000
    model_retain_rounds: int = 4
    real_ratio: float = 0.5
    model_gradient_steps: int = -1
    learning_rate: float = 6.3e-4
    batch_size: int = 128
    buffer_size: int = 50_000
    learning_starts: int = 0
    gamma: float = 0.99
    target_update_interval: int = 250
    target_clock: str = "updates"
    train_freq: int = 4
    gradient_steps: int = -1
    exploration_fraction: float = 0.12
    exploration_initial_eps: float = 1.0
    exploration_final_eps: float = 0.1
    max_grad_norm: float = 10.0
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    model: ModelConfig = field(default_factory=dyna_model_config)
    eval_episodes: int = 3
    train_model_when_k0: bool = True
    deterministic_rollouts: bool = False
    multi_step_targets: bool = False
    model_use: str = "dyna"
    lookahead_expectation: bool = False
    lookahead_trust: float = 0.0
    controller_feedback: str = "evaluation"
    batched_models: bool = False
    device: str = "cpu"

    def __post_init__(self) -> None:
        positive = ("budget", "phase_length", "model_train_freq", "rollout_freq", "train_freq", "batch_size")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise ValueError(f"DynaConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.real_ratio <= 1.0:
            raise ValueError(f"DynaConfig.real_ratio must lie in [0, 1], got {self.real_ratio}")
        if self.target_update_interval < 1:
            raise ValueError(f"DynaConfig.target_update_interval must be >= 1, got {self.target_update_interval}")
        if self.model_use not in ("dyna", "lookahead"):
            raise ValueError(f"DynaConfig.model_use must be 'dyna' or 'lookahead', got {self.model_use!r}")
        if self.controller_feedback not in ("evaluation", "training"):
            raise ValueError(
                f"DynaConfig.controller_feedback must be 'evaluation' or 'training', got {self.controller_feedback!r}"
            )
        if self.target_clock not in ("updates", "env_steps"):
            raise ValueError(f"DynaConfig.target_clock must be 'updates' or 'env_steps', got {self.target_clock!r}")

    @property
    def updates_per_round(self) -> int:
        """Ordinary DQN updates per training round."""
        return self.train_freq if self.gradient_steps < 0 else self.gradient_steps

    @property
    def extra_updates_per_round(self) -> int:
        """Extra updates per training round of a run that uses the model (or is compute-matched)."""
        return self.updates_per_round if self.model_gradient_steps < 0 else self.model_gradient_steps

    @classmethod
    def for_env(cls, env_id: str, **overrides: Any) -> DynaConfig:
        """rl-zoo's DQN hyperparameters for ``env_id``'s family (MountainCar, Acrobot, CartPole), then ``overrides``.

        rl-zoo's target interval counts env steps; here it counts gradient steps, so it is scaled by rl-zoo's updates
        per env step (the same sync times for plain DQN).
        """
        from mbrl.termination import base_name

        name = base_name(env_id)
        if name not in ZOO_DQN:
            raise ValueError(f"no rl-zoo DQN hyperparameters for {env_id!r}; known: {sorted(ZOO_DQN)}")
        zoo = dict(ZOO_DQN[name])
        steps = zoo["train_freq"] if zoo["gradient_steps"] < 0 else zoo["gradient_steps"]
        zoo["target_update_interval"] = max(1, round(zoo["target_update_interval"] * steps / zoo["train_freq"]))
        values: dict[str, Any] = {**zoo, **overrides}
        return cls(**values)
