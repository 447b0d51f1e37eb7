"""Trainer presets small enough that a CLI test trains through them in seconds (written to YAML, passed as
``--config``).

Importable from every test as ``tiny_presets``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

from typing import Any

#: Dyna-DQN (CartPole-v1 in the tests): 100-step phases, learning from step 50, a two-member model of 8 units.
DYNA_TINY: dict[str, Any] = {
    "phase_length": 100,
    "learning_starts": 50,
    "buffer_size": 500,
    "net_arch": [16, 16],
    "num_model_rollouts": 20,
    "model_train_freq": 50,
    "rollout_freq": 50,
    "eval_episodes": 1,
    "model": {"ensemble_size": 2, "num_elites": 1, "hidden_size": 8, "num_layers": 1, "max_epochs": 2},
}
