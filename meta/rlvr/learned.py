"""A trained RLVR meta-policy as a controller: in the compact GRPO trainer and, through a callback, inside TRL.

:class:`LearnedGroupSize` loads a ``meta_policy.pt`` exported by meta-training on the RLVR meta-MDP
(:mod:`meta.rlvr.meta_mdp`, ``rolloutlab``'s meta-trainer with an :class:`~meta.rlvr.meta_mdp.RLVRMetaConfig`) and
rebuilds the exact observation the meta-env showed the agent. :class:`GroupSizeCallback` drives it inside
:class:`meta.rlvr.trl.AllocatingGRPOTrainer` (a ``transformers`` ``TrainerCallback``): at every phase mark of the
token budget it evaluates held-out accuracy with a function you pass, asks the controller for G and sets the uniform
allocator's group size; once the budget is spent it stops training. The callback runs wherever TRL runs (CPU, or CUDA
through accelerate); the controller itself is a small MLP on the CPU.

    controller = LearnedGroupSize("runs/meta/rlvr/meta_policy.pt")
    trainer = AllocatingGRPOTrainer(..., allocator=Uniform(controller.g))
    GroupSizeCallback(controller, evaluate=my_held_out_accuracy).attach(trainer)
    trainer.train()

:class:`RandomGroupSize` (a random meta-policy, a baseline) has the same interface. :class:`TokenBudgetCallback`
(the callback's base) is the same protocol without decisions: held-out accuracy at the same phase marks and the stop
at the budget, for any allocator (a baseline arm of a comparison).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from transformers import TrainerCallback

from meta.control.meta_policy import build_meta_policy
from meta.control.protocol import Controller, Feedback
from meta.rlvr.allocators import Uniform
from meta.rlvr.meta_mdp import RLVR_FEATURE_NAMES, GroupSizeActions, GroupSizeFeedback, RLVRMetaConfig, rlvr_featurize
from rolloutlab.checkpoint import CheckpointError, load_checkpoint
from rolloutlab.config import ConfigError, from_dict


class GroupSizeController(Controller):
    """Base: chooses G from the RLVR meta-MDP's phase feedback, tracking J (held-out accuracy) like the meta-env.

    Call :meth:`decide` once before each phase with the previous phase's feedback (:class:`GroupSizeFeedback`'s
    dict: ``budget_fraction``, ``accuracy``, ``solve_rates``, ...); before the first phase pass
    ``{"budget_fraction": 0.0, "accuracy": <the warm start's held-out accuracy>}``. A missing or non-finite accuracy
    keeps the previous J.

    Args:
        config: The meta-MDP settings the policy was trained on (grid, start G, action set).
    """

    def __init__(self, config: RLVRMetaConfig) -> None:
        self.config = config
        self.actions: GroupSizeActions = config.actions()
        self.g_max = max(config.grid)
        self.reset()

    def reset(self) -> None:
        self.g = int(self.config.g_init)
        self.j: float | None = None
        self.j_prev: float | None = None

    def observe(self, feedback: Feedback) -> np.ndarray:
        """Update J from ``feedback["accuracy"]`` and return the meta-observation (as in the meta-env)."""
        value = feedback.get("accuracy")
        if value is not None and math.isfinite(float(value)):
            # The first accuracy is J_0, for which the meta-env's trend is 0.
            self.j_prev, self.j = (self.j, float(value)) if self.j is not None else (float(value), float(value))
        j = self.j if self.j is not None else 0.0
        j_prev = self.j_prev if self.j_prev is not None else j
        return rlvr_featurize(feedback, self.g, j, j_prev, self.g_max)

    def choose(self, obs: np.ndarray) -> int:
        """The meta-action for ``obs``."""
        raise NotImplementedError

    def decide(self, feedback: Feedback) -> int:
        obs = self.observe(feedback)
        self.g = self.actions.apply(self.g, self.choose(obs))
        return self.g

    def state_dict(self) -> dict[str, Any]:
        return {"g": self.g, "j": self.j, "j_prev": self.j_prev}


class LearnedGroupSize(GroupSizeController):
    """G chosen by a meta-policy trained on the RLVR meta-MDP (``meta_policy.pt``).

    Args:
        path: The exported policy (a directory means its ``meta_policy.pt``).
        deterministic: Greedy actions (default) or sampled ones (PPO only).

    Raises:
        CheckpointError: not a meta-policy, a rollout-length one, or one trained on other features.
    """

    def __init__(self, path: str | Path, deterministic: bool = True) -> None:
        path = Path(path)
        if path.is_dir():
            path = path / "meta_policy.pt"
        envelope = load_checkpoint(path, kind="meta-policy")
        state = envelope["state"]
        if list(state["feature_names"]) != list(RLVR_FEATURE_NAMES):
            raise CheckpointError(
                f"{path}: not an RLVR meta-policy (features {state['feature_names']}); a rollout-length meta-policy "
                "loads with meta.rollout_length.LearnedController"
            )
        try:
            config = from_dict(RLVRMetaConfig, envelope["config"]["env"])
        except (ConfigError, ValueError) as exc:
            raise CheckpointError(f"{path}: bad RLVR meta-MDP settings: {exc}") from exc
        super().__init__(config)
        self.path = str(path)
        self.deterministic = deterministic
        self.policy = build_meta_policy(
            state["algo"], list(state["net_arch"]), config.observation_space(), self.actions.space()
        )
        self.policy.load_state_dict(state["policy"])
        self.policy.set_training_mode(False)

    def choose(self, obs: np.ndarray) -> int:
        action, _ = self.policy.predict(obs, deterministic=self.deterministic)
        return int(action)

    def __repr__(self) -> str:
        return f"LearnedGroupSize({self.path!r})"


class RandomGroupSize(GroupSizeController):
    """A random meta-policy: a uniformly random meta-action at every decision (seeded)."""

    def __init__(self, config: RLVRMetaConfig, seed: int = 0) -> None:
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        super().__init__(config)

    def choose(self, obs: np.ndarray) -> int:
        return int(self.rng.integers(self.actions.n))


#: The type :meth:`TokenBudgetCallback.attach` returns (the subclass it is called on).
_Callback = TypeVar("_Callback", bound="TokenBudgetCallback")


class TokenBudgetCallback(TrainerCallback):
    """Runs an :class:`~meta.rlvr.trl.AllocatingGRPOTrainer` to a completion-token budget, evaluating at phase marks.

    The budget (completion tokens in ``trainer.ledger``, what the RLVR meta-MDP spends) is split into ``phases``
    equal shares, as in the meta-env: phase t ends after the GRPO step that brings the run to ``(t + 1) / phases`` of
    the budget (that step finishes; its overshoot comes off the next phase). Held-out accuracy is measured with
    ``evaluate()`` before the first step, after every step that crosses one of the marks ``1 .. phases - 1`` (once
    per mark: a step that crosses two marks records two points of the same model, as the meta-env's empty phase
    does) and at the end of training. Training stops after the step that spends the budget
    (``control.should_training_stop``); set the trainer's ``max_steps`` high enough to reach it.

    This class alone is the fixed protocol every arm of a comparison shares (any allocator);
    :class:`GroupSizeCallback` adds the meta-policy's decisions at the marks.

    Args:
        evaluate: Held-out accuracy of the trainer's current model, in ``[0, 1]`` (the trainer's training / eval mode
            is restored after each call).
        token_budget: Completion tokens of the run.
        phases: Phase marks of the budget.

    Raises:
        ValueError: ``phases < 1`` or ``token_budget < phases``.

    Attributes:
        curve: ``[{"tokens", "step", "accuracy", "phase"}]``: at train begin (phase 0), at each mark reached (its phase)
            and at train end (``phase`` None).
        stopped: Whether the budget stopped training (``False``: training ended first, e.g. at ``max_steps``).
        trainer: The bound trainer (:meth:`attach`).
    """

    def __init__(self, evaluate: Callable[[], float], token_budget: int, phases: int) -> None:
        self.evaluate = evaluate
        self.token_budget = int(token_budget)
        self.phases = int(phases)
        if self.phases < 1 or self.token_budget < self.phases:
            raise ValueError(f"need 1 <= phases <= token_budget, got {self.phases}, {self.token_budget}")
        self.trainer: Any = None
        self.phase = 0
        self.curve: list[dict[str, Any]] = []
        self.stopped = False

    def attach(self: _Callback, trainer: Any) -> _Callback:
        """Bind to ``trainer`` (checked, and added to its callbacks) and return ``self``.

        Raises:
            TypeError: ``trainer`` has no cost ledger (not an ``AllocatingGRPOTrainer``), or what a subclass refuses.
        """
        self.check(trainer)
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def check(self, trainer: Any) -> None:
        """Refuse a trainer this callback cannot drive (called by :meth:`attach` and again at train begin)."""
        if not hasattr(trainer, "ledger"):
            raise TypeError(
                f"{type(self).__name__} counts the budget in AllocatingGRPOTrainer's ledger: got a "
                f"{type(trainer).__name__} without one (use meta.rlvr.trl.AllocatingGRPOTrainer)"
            )

    def mark(self, phase: int) -> float:
        """Completion tokens at the end of phase ``phase - 1`` (``mark(phases)`` is the budget)."""
        return phase * self.token_budget / self.phases

    def tokens(self) -> int:
        """Completion tokens the run has generated so far."""
        return int(self.trainer.ledger.completion_tokens)

    def measure(self) -> float:
        """``evaluate()``, leaving the model in the train / eval mode it was in (an evaluator may call ``eval()``)."""
        model = self.trainer.model
        training = bool(model.training)
        try:
            return float(self.evaluate())
        finally:
            model.train(training)

    def at_mark(self, phase: int, tokens: int, accuracy: float) -> None:
        """Hook: phase ``phase`` (0 = before the first step) begins with ``tokens`` spent and this accuracy."""

    def _point(self, phase: int | None, tokens: int, accuracy: float) -> None:
        step = int(self.trainer.state.global_step)
        self.curve.append({"tokens": tokens, "step": step, "accuracy": accuracy, "phase": phase})

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer is None:
            raise RuntimeError(
                f"{type(self).__name__} is not bound to a trainer: call {type(self).__name__}(...).attach(trainer) "
                "instead of passing it in callbacks=[...]"
            )
        self.check(self.trainer)
        self.curve, self.stopped = [], False
        tokens = self.tokens()
        # A resumed run starts at the phase its ledger has reached (a subclass's state before it is not restored).
        self.phase = sum(tokens >= self.mark(p) for p in range(1, self.phases))
        accuracy = self.measure()
        self._point(self.phase, tokens, accuracy)
        self.at_mark(self.phase, tokens, accuracy)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        tokens = self.tokens()
        accuracy: float | None = None
        while self.phase + 1 < self.phases and tokens >= self.mark(self.phase + 1):
            if accuracy is None:  # one evaluation per step: every mark it crossed sees the same model
                accuracy = self.measure()
            self.phase += 1
            self._point(self.phase, tokens, accuracy)
            self.at_mark(self.phase, tokens, accuracy)
        if tokens >= self.token_budget:
            control.should_training_stop = True
            self.stopped = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        tokens, step = self.tokens(), int(state.global_step)
        last = self.curve[-1] if self.curve else None
        # The model of the last mark's step is the final model when training ended at that step: no second pass.
        same = last is not None and last["tokens"] == tokens and last["step"] == step
        self._point(None, tokens, float(last["accuracy"]) if same and last is not None else self.measure())
        if not self.stopped:
            warnings.warn(
                f"training ended at step {step} with {tokens} of the {self.token_budget} completion tokens spent; "
                "raise max_steps to reach the budget",
                stacklevel=2,
            )

    @property
    def final_accuracy(self) -> float:
        """Held-out accuracy at the end of training (after :meth:`on_train_end`)."""
        if not self.curve or self.curve[-1]["phase"] is not None:
            raise RuntimeError("no final evaluation yet: train the bound trainer first")
        return float(self.curve[-1]["accuracy"])


class GroupSizeCallback(TokenBudgetCallback):
    """Sets the group size of an :class:`~meta.rlvr.trl.AllocatingGRPOTrainer` from a :class:`GroupSizeController`.

    The RLVR meta-MDP's protocol inside TRL (:class:`TokenBudgetCallback`'s marks and budget stop): before the first
    step the controller sees ``{"budget_fraction", "accuracy"}`` of the starting model; after the step that crosses
    each phase mark it sees the phase's feedback (:class:`~meta.rlvr.meta_mdp.GroupSizeFeedback` of every step's
    per-prompt solve rates, generated responses and completion tokens from ``trainer.last_step`` and TRL's logged
    token entropy), and its G becomes ``trainer.allocator.group_size`` for the steps that follow. A step that crosses
    two marks gives the second an empty phase, as the meta-env does. Response lengths are observed over the policy's
    own ``max_new_tokens``, as in its training.

    Needs a plain :class:`~meta.rlvr.allocators.Uniform` allocator and one generation and optimizer step per training
    step (``gradient_accumulation_steps = 1``, ``num_iterations = 1``: the compact trainer's regime the policy learned
    in, and what makes ``last_step`` the whole step). Bind it with :meth:`attach`.

    Args:
        controller: Chooses G (``decide(feedback) -> int``).
        evaluate: Held-out accuracy of the trainer's current model, in ``[0, 1]``.
        token_budget: Completion tokens of the run; ``None``: the controller's ``config.token_budget``.
        phases: Decisions per run; ``None``: the controller's ``config.phases``.

    Attributes:
        schedule: ``[(completion_tokens, accuracy, G)]`` at every decision (the first before any step).
        feedbacks: The feedback dict the controller got at every decision.
    """

    def __init__(
        self,
        controller: GroupSizeController,
        evaluate: Callable[[], float],
        token_budget: int | None = None,
        phases: int | None = None,
    ) -> None:
        super().__init__(
            evaluate,
            token_budget if token_budget is not None else controller.config.token_budget,
            phases if phases is not None else controller.config.phases,
        )
        self.controller = controller
        self.tracker = GroupSizeFeedback(controller.config.max_new_tokens)
        self.schedule: list[tuple[int, float, int]] = []
        self.feedbacks: list[dict[str, Any]] = []

    def check(self, trainer: Any) -> None:
        """Refuse anything but a plain uniform allocator and one generation per optimizer step.

        Raises:
            TypeError: not an ``AllocatingGRPOTrainer`` or not a plain ``Uniform`` allocator.
            ValueError: gradient accumulation, several iterations per generation, or a row budget
                (``max_rows_per_step``) smaller than the prompts per step times the policy's largest G.
        """
        super().check(trainer)
        allocator = getattr(trainer, "allocator", None)
        # Exactly Uniform: a subclass such as DAPO's DynamicSampling drops and refills groups, unseen in training.
        if type(allocator) is not Uniform:
            raise TypeError(
                "GroupSizeCallback sets a uniform group size: build the trainer with "
                f"allocator=meta.rlvr.allocators.Uniform(G), got {type(allocator).__name__}"
            )
        accumulation = int(getattr(trainer.args, "gradient_accumulation_steps", 1))
        iterations = int(getattr(trainer, "num_iterations", 1))
        if accumulation != 1 or iterations != 1:
            raise ValueError(
                "GroupSizeCallback reads one generated batch per optimizer step (the meta-policy's training regime): "
                f"set gradient_accumulation_steps=1 and num_iterations=1, got {accumulation} and {iterations}"
            )
        # The adapter cuts a step to max_rows_per_step rows; the policy's largest G must fit, or its choice is cut.
        prompts = int(trainer.args.per_device_train_batch_size) // int(trainer.num_generations)
        needed = prompts * max(self.controller.config.grid)
        rows = int(getattr(trainer, "max_rows_per_step", needed))
        if rows < needed:
            raise ValueError(
                f"GroupSizeCallback may set G up to {max(self.controller.config.grid)} for {prompts} prompts per step: "
                f"build the trainer with max_rows_per_step={needed} (got max_rows_per_step={rows})"
            )

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer is not None:
            self.controller.reset()
            self.tracker = GroupSizeFeedback(self.controller.config.max_new_tokens)
            self.schedule, self.feedbacks = [], []
        super().on_train_begin(args, state, control, **kwargs)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        step: Mapping[str, Any] = trainer.last_step
        # TRL appends the loss batch's token-mean entropy once per optimizer step (before logging clears it).
        entropies = trainer._metrics["train"].get("entropy", [])
        self.tracker.add(
            step.get("solve_rates", []),
            int(step.get("responses", 0)),
            int(step.get("completion_tokens", 0)),
            float(entropies[-1]) if entropies else 0.0,
        )
        super().on_step_end(args, state, control, **kwargs)

    def at_mark(self, phase: int, tokens: int, accuracy: float) -> None:
        if not self.schedule:
            feedback: dict[str, Any] = {"budget_fraction": tokens / self.token_budget, "accuracy": accuracy}
        else:
            feedback = self.tracker.feedback(tokens / self.token_budget, accuracy)
        g = int(self.controller.decide(feedback))
        allocator: Uniform = self.trainer.allocator
        allocator.group_size = g
        self.schedule.append((tokens, accuracy, g))
        self.feedbacks.append(feedback)
