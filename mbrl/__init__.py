"""World models and model-based learners (MBPO on SB3 SAC, Dyna-DQN).

Note: ``mbrl`` is also the import name of facebookresearch's mbrl-lib; do not install both in one environment.
"""
