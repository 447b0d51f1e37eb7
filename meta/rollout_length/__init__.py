"""The meta-level MDP over a model-based learning run, and the SB3 meta-agent that chooses its rollout length.

Bhatia, Thomas & Zilberstein (2022), "Adaptive Rollout Length for Model-Based RL Using Model-Free Deep RL": choosing
the Dyna rollout length K over a whole training run is itself a sequential decision problem. One meta-episode is one
inner Dyna-DQN run under a fixed interaction budget; every ``phase_length`` env steps the meta-agent moves K UP, DOWN
or leaves it (NOOP) and is rewarded with the change in the inner learner's return, so its return telescopes to the
final return.

The UP/DOWN/NOOP rule is :func:`meta.control.step_rollout_length`; the generic meta-MDP, its process-pool and Ray
vector envs and meta-training with checkpoint/resume are shared with the RLVR meta-MDP and live in :mod:`meta.control`
(:mod:`~meta.control.mdp`, :mod:`~meta.control.parallel`, :mod:`~meta.control.training`). Modules here:
:mod:`.features` (the normalized observation), :mod:`.actions` (the K action sets), :mod:`.inner` (the inner-learner
protocol and factories), :mod:`.toy` (an analytic stand-in learner for tests), :mod:`.env` (``RolloutLengthEnv`` and
the batched ``MetaVecEnv``), :mod:`.learned` (``LearnedController``), :mod:`.evaluate` (the arms comparison),
:mod:`.cli` and :mod:`.benchmark`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab.lazy import lazy_getattr

if TYPE_CHECKING:
    from meta.rollout_length.env import MetaEnvConfig, MetaVecEnv, RolloutLengthEnv
    from meta.rollout_length.learned import LearnedController

__all__ = ["LearnedController", "MetaEnvConfig", "MetaVecEnv", "RolloutLengthEnv"]

# The meta-env and the learned controller pull in torch and SB3; they load on first use (PEP 562).
_HOMES = {
    "LearnedController": "meta.rollout_length.learned",
    "MetaEnvConfig": "meta.rollout_length.env",
    "MetaVecEnv": "meta.rollout_length.env",
    "RolloutLengthEnv": "meta.rollout_length.env",
}


__getattr__ = lazy_getattr(__name__, _HOMES)
