"""rolloutlab's gymnasium environments, registered under the ``rolloutlab/`` namespace on import.

>>> import gymnasium as gym, envs
>>> env = gym.make("rolloutlab/Wordle-v0")  # doctest: +SKIP

This package is the ground floor: it imports no other rolloutlab package. Entry points are strings, so registering does
not import the environment modules (or their word lists) until an env is made.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

# Each pillar adds its environments to this table: (id, entry point, kwargs, max_episode_steps or None).
_ENVS: list[tuple[str, str, dict[str, object], int | None]] = [
    # --- wordle (planning pillar); the env truncates itself after its 6 guesses ---
    ("rolloutlab/Wordle-v0", "envs.wordle:WordleEnv", {}, None),
    # --- metarl (in-context pillar); one episode = one whole meta-rollout, so the envs end it themselves ---
    ("rolloutlab/BernoulliBandit-v0", "envs.metarl.bandit:BernoulliBanditEnv", {"n_arms": 5, "horizon": 100}, None),
    ("rolloutlab/PassiveTMaze-v0", "envs.metarl.tmaze:PassiveTMazeEnv", {"corridor_length": 10}, None),
    ("rolloutlab/DarkKeyDoor-v0", "envs.metarl.keydoor:DarkKeyDoorEnv", {}, None),
    # --- perturbed physics (meta rollout-length pillar); defaults are the paper's test perturbation ---
    ("rolloutlab/PerturbedMountainCar-v0", "envs.perturbed:PerturbedMountainCarEnv", {}, 200),
    ("rolloutlab/PerturbedAcrobot-v1", "envs.perturbed:PerturbedAcrobotEnv", {}, 500),
    # --- point mass (mbrl pillar): the toy of the model-based "it learns" tests and the quick bench ---
    ("rolloutlab/PointMass-v0", "envs.point_mass:PointMassEnv", {}, 30),
    # --- Pendulum-v1 with 5 torque levels (meta pillar's headroom gate); gymnasium's 200-step limit ---
    ("rolloutlab/DiscretePendulum-v0", "envs.pendulum:DiscretePendulumEnv", {}, 200),
]

for _env_id, _entry_point, _kwargs, _max_steps in _ENVS:
    if _env_id not in registry:
        register(id=_env_id, entry_point=_entry_point, kwargs=_kwargs, max_episode_steps=_max_steps)

ENV_IDS: tuple[str, ...] = tuple(env_id for env_id, _, _, _ in _ENVS)
"""Every environment id this package registers."""
