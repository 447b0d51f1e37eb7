"""Meta-RL environments: one gymnasium episode is one whole meta-rollout (a task, possibly several inner episodes).

* :class:`~envs.metarl.bandit.BernoulliBanditEnv` — n arms, H pulls, arm means ~ U[0, 1] per task.
* :class:`~envs.metarl.tmaze.PassiveTMazeEnv` — a cue at the start, a corridor of length L, a choice at the junction.
* :class:`~envs.metarl.keydoor.DarkKeyDoorEnv` — 8x8 grid, unseen key and door, 50-step episodes in a 500-step rollout.

:class:`~envs.metarl.rl2.RL2Wrapper` appends the RL^2 inputs (previous action, previous reward, reset flag) that both
the in-context agent and the recurrent baseline read. Each env reports an inner-episode boundary with
``info["inner_reset"]`` (``True`` when the returned observation starts a new inner episode).
"""

from __future__ import annotations

from envs.metarl.bandit import BernoulliBanditEnv
from envs.metarl.keydoor import DarkKeyDoorEnv
from envs.metarl.rl2 import RL2Wrapper
from envs.metarl.tmaze import PassiveTMazeEnv

__all__ = ["BernoulliBanditEnv", "DarkKeyDoorEnv", "PassiveTMazeEnv", "RL2Wrapper"]
