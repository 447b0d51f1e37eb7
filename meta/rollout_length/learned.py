"""``LearnedController``: a trained SB3 meta-policy behind the framework-free controller protocol.

The ``learned:PATH`` controller spec (registered in :mod:`meta.control.spec`, which imports this module only when such
a spec is built) makes ``rolloutlab mbrl train --controller learned:runs/.../meta_policy.pt`` and :mod:`.evaluate` use
a meta-policy the same way as any schedule. The
controller rebuilds the exact observation the meta-env showed the agent during training
(:func:`~meta.rollout_length.features.featurize`), keeping J, the previous J and K as its own saveable state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from meta.control.meta_policy import build_meta_policy
from meta.control.protocol import Feedback, RolloutLengthController
from meta.control.spec import Spec
from meta.rollout_length.features import FEATURE_NAMES, featurize
from rolloutlab.checkpoint import CheckpointError, load_checkpoint
from rolloutlab.config import from_dict


class LearnedController(RolloutLengthController):
    """Rollout length chosen by a meta-policy saved by meta-training (``meta_policy.pt``).

    Call :meth:`decide` once per decision point, *before* the phase it governs, with the previous phase's feedback
    (keys as returned by ``BatchedDynaDQN.run_phase``: ``mean_return``, ``model_return_error``, ...) and
    ``budget_fraction`` = fraction of the budget used so far. At the first decision the feedback may hold only
    ``budget_fraction``. Missing or non-finite values count as 0 (J keeps its previous value).

    Args:
        path: A ``meta_policy.pt`` written by :func:`meta.control.training.export_policy`.
        deterministic: Greedy actions (default) or sampled ones (PPO only; DQN is greedy either way).

    Raises:
        CheckpointError: The file is not a meta-policy or was trained on other features.
    """

    def __init__(self, path: str | Path, deterministic: bool = True) -> None:
        # The meta-env module pulls in the inner learner (torch, SB3); importing it here keeps registering the
        # ``learned:PATH`` spec, which every CLI start does, cheap.
        from meta.rollout_length.env import MetaEnvConfig, observation_space

        envelope = load_checkpoint(path, kind="meta-policy")
        state = envelope["state"]
        if list(state["feature_names"]) != list(FEATURE_NAMES):
            raise CheckpointError(f"{path}: meta-policy was trained on features {state['feature_names']}")
        self.path = str(path)
        self.env_config = from_dict(MetaEnvConfig, envelope["config"]["env"])
        self.scales = self.env_config.scales()
        self.deterministic = deterministic
        self.actions = self.env_config.actions()
        self.policy = build_meta_policy(
            state["algo"], list(state["net_arch"]), observation_space(), self.actions.space()
        )
        self.policy.load_state_dict(state["policy"])
        self.policy.set_training_mode(False)
        self.k = self.env_config.k_init
        self.j = self.j_prev = self.env_config.initial_return

    def reset(self) -> None:
        self.k = self.env_config.k_init
        self.j = self.j_prev = self.env_config.initial_return

    def observe(self, feedback: Feedback) -> np.ndarray:
        """Update J from ``feedback["mean_return"]`` and return the meta-observation (as in the meta-env)."""
        value = feedback.get("mean_return")
        if value is not None and math.isfinite(float(value)):
            self.j_prev, self.j = self.j, float(value)
        return featurize(feedback, self.k, self.j, self.j_prev, self.scales)

    def decide(self, feedback: Feedback) -> int:
        obs = self.observe(feedback)
        action, _ = self.policy.predict(obs, deterministic=self.deterministic)
        self.k = self.actions.apply(self.k, int(action))
        return self.k

    def state_dict(self) -> dict[str, Any]:
        return {"k": self.k, "j": self.j, "j_prev": self.j_prev}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)

    def __repr__(self) -> str:
        return f"LearnedController({self.path!r})"


def learned_from_spec(spec: Spec) -> LearnedController:
    """``learned:PATH``: the meta-policy at PATH, a ``meta_policy.pt`` or the run directory holding it (the spec factory
    :data:`meta.control.spec.SPECS` names)."""
    args = spec.raw_args
    if not args:
        raise ValueError("controller spec 'learned' needs a path: learned:PATH/TO/meta_policy.pt")
    path = Path(args)
    if path.is_dir():
        path = path / "meta_policy.pt"
    try:
        return LearnedController(path)
    except CheckpointError as exc:
        # A spec is parsed where options are checked; a bad file must be refused there like any other bad spec.
        raise ValueError(f"controller spec 'learned:{args}': {exc}") from exc
