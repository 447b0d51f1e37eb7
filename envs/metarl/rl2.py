"""The RL^2 input wrapper (Duan et al., 2016): the agent sees what it did and what it got, plus episode boundaries."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class RL2Wrapper(gym.ObservationWrapper[np.ndarray, np.int64, np.ndarray], gym.utils.RecordConstructorArgs):
    """Append ``[one_hot(prev_action), prev_reward, reset_flag]`` to a metarl env's Box observation.

    One gymnasium episode stays one meta-rollout, so a recurrent policy whose state is reset per episode (SB3's
    ``RecurrentPPO``) carries its memory across the inner episodes of a task. At the first step of a task the previous
    action is all zeros and the previous reward 0. ``reset_flag`` is 1.0 when the observation starts a new inner
    episode (read from ``info["inner_reset"]``).

    With ``previous_observation`` the observation the previous action was taken from follows (zeros at a task's first
    step), so one input holds a whole transition ``(o_{t-1}, a_{t-1}, r_{t-1}, o_t)`` as in the Decision-Pretrained
    Transformer's context. Where an inner episode ends on a reward (the key-door's door) the next observation is
    already the new episode's start, and only the observation before it says where the reward was.

    Observation: float32, shape ``(obs_dim + n_actions + 2,)``, or ``(2 * obs_dim + n_actions + 2,)`` with
    ``previous_observation``.

    Args:
        env: An env with a ``Box`` observation and a ``Discrete`` action space that reports ``info["inner_reset"]``.
        reward_bound: Bound of the reward slot in the observation space (rewards are not clipped; the bound only
            describes the space for checkers).
        previous_observation: Append the previous observation.
    """

    def __init__(self, env: gym.Env, reward_bound: float = 1.0, previous_observation: bool = False) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, reward_bound=reward_bound, previous_observation=previous_observation
        )
        gym.ObservationWrapper.__init__(self, env)
        if not isinstance(env.observation_space, spaces.Box) or not isinstance(env.action_space, spaces.Discrete):
            raise TypeError("RL2Wrapper needs a Box observation space and a Discrete action space")
        self.n_actions = int(env.action_space.n)
        base = env.observation_space
        self.previous_observation = bool(previous_observation)
        previous_low = [np.minimum(base.low.ravel(), 0.0)] if self.previous_observation else []
        previous_high = [np.maximum(base.high.ravel(), 0.0)] if self.previous_observation else []
        low = np.concatenate([base.low.ravel(), np.zeros(self.n_actions), [-reward_bound, 0.0], *previous_low])
        high = np.concatenate([base.high.ravel(), np.ones(self.n_actions), [reward_bound, 1.0], *previous_high])
        self.observation_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        self._prev_action = -1
        self._prev_reward = 0.0
        self._reset_flag = 1.0
        self._obs_dim = int(np.prod(base.shape))
        self._prev_obs = np.zeros(self._obs_dim, dtype=np.float32)
        self._last_obs = np.zeros(self._obs_dim, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._prev_action, self._prev_reward, self._reset_flag = -1, 0.0, 1.0
        self._prev_obs = np.zeros(self._obs_dim, dtype=np.float32)
        self._last_obs = np.asarray(obs, dtype=np.float32).ravel()
        return self.observation(obs), info

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)  # type: ignore[arg-type]
        self._prev_action = int(action)
        self._prev_reward = float(reward)
        self._reset_flag = float(bool(info.get("inner_reset", False)))
        self._prev_obs, self._last_obs = self._last_obs, np.asarray(obs, dtype=np.float32).ravel()
        return self.observation(obs), float(reward), terminated, truncated, info

    def observation(self, observation: np.ndarray) -> np.ndarray:
        one_hot = np.zeros(self.n_actions, dtype=np.float32)
        if self._prev_action >= 0:
            one_hot[self._prev_action] = 1.0
        extra = np.array([self._prev_reward, self._reset_flag], dtype=np.float32)
        parts = [np.asarray(observation, dtype=np.float32).ravel(), one_hot, extra]
        if self.previous_observation:
            parts.append(self._prev_obs)
        return np.concatenate(parts)
