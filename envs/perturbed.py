"""Perturbed-physics MountainCar and Acrobot, and a domain-randomization sampler over their physics.

Bhatia, Thomas & Zilberstein (2022, "Adaptive Rollout Length for Model-Based RL Using Model-Free Deep RL", sec. 5)
train the meta-controller on the nominal environments and score it on perturbed ones:

* MountainCar: gravity 0.0025 -> 0.003 (the car is weaker relative to the hill).
* Acrobot: g 9.8 -> 12, link 1 length and mass x1.2, link 2 length and mass x0.8.

MountainCar keeps gravity as an attribute, so a subclass only sets it. Acrobot's gravity is a local constant inside
gymnasium's ``_dsdt``, so :class:`PerturbedAcrobotEnv` re-states the equations of motion (Sutton & Barto 2018,
sec. 11.3 / Spong 1995, the "book" variant gymnasium uses by default) with ``gravity`` as a parameter.

Both are registered (see ``envs/__init__.py``) as ``rolloutlab/PerturbedMountainCar-v0`` and
``rolloutlab/PerturbedAcrobot-v1`` with the paper's *test* perturbation as default keyword arguments; any physics
parameter can be overridden through ``gymnasium.make(..., gravity=...)`` or :func:`make_perturbed`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import cos, pi, sin
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv

#: The registered id of the perturbed twin of each supported base environment.
PERTURBED_IDS: dict[str, str] = {
    "MountainCar-v0": "rolloutlab/PerturbedMountainCar-v0",
    "Acrobot-v1": "rolloutlab/PerturbedAcrobot-v1",
}

#: Physics of the unperturbed gymnasium environments.
NOMINAL_PHYSICS: dict[str, dict[str, float]] = {
    "MountainCar-v0": {"gravity": 0.0025},
    "Acrobot-v1": {"gravity": 9.8, "link_length_1": 1.0, "link_mass_1": 1.0, "link_length_2": 1.0, "link_mass_2": 1.0},
}

#: The paper's test-time perturbation (Bhatia et al. 2022, sec. 5).
TEST_PHYSICS: dict[str, dict[str, float]] = {
    "MountainCar-v0": {"gravity": 0.003},
    "Acrobot-v1": {"gravity": 12.0, "link_length_1": 1.2, "link_mass_1": 1.2, "link_length_2": 0.8, "link_mass_2": 0.8},
}

#: Default domain-randomization ranges (uniform, inclusive): wide enough to contain both the nominal and the test
#: physics, so training under randomization sees the test conditions without being told them.
DEFAULT_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "MountainCar-v0": {"gravity": (0.0022, 0.0032)},
    "Acrobot-v1": {
        "gravity": (8.8, 12.5),
        "link_length_1": (0.9, 1.25),
        "link_mass_1": (0.9, 1.25),
        "link_length_2": (0.75, 1.1),
        "link_mass_2": (0.75, 1.1),
    },
}


class PerturbedMountainCarEnv(MountainCarEnv):
    """``MountainCar-v0`` with a configurable gravity constant (gymnasium's default is 0.0025).

    Args:
        render_mode: As for :class:`~gymnasium.envs.classic_control.mountain_car.MountainCarEnv`.
        goal_velocity: As for the base class.
        gravity: The hill's pull in the velocity update ``v += (a - 1) * force - cos(3 x) * gravity``.
    """

    def __init__(self, render_mode: str | None = None, goal_velocity: float = 0, gravity: float = 0.003) -> None:
        super().__init__(render_mode=render_mode, goal_velocity=goal_velocity)
        if not gravity > 0:
            raise ValueError(f"gravity must be > 0, got {gravity}")
        self.gravity = float(gravity)


class PerturbedAcrobotEnv(AcrobotEnv):
    """``Acrobot-v1`` with configurable gravity, link lengths and link masses.

    The centre-of-mass positions and moments of inertia keep gymnasium's values (0.5 m, 1 kg m^2), as in the paper's
    perturbation, which changes only the named constants. Link 2's length enters the dynamics only through the
    (unchanged) centre-of-mass position, so it affects rendering alone, exactly as in gymnasium.

    Args:
        render_mode: As for :class:`~gymnasium.envs.classic_control.acrobot.AcrobotEnv`.
        gravity: Gravitational acceleration g in m/s^2 (gymnasium: 9.8).
        link_length_1: Length of link 1 in m (1.0).
        link_mass_1: Mass of link 1 in kg (1.0).
        link_length_2: Length of link 2 in m (1.0).
        link_mass_2: Mass of link 2 in kg (1.0).
    """

    def __init__(
        self,
        render_mode: str | None = None,
        gravity: float = 12.0,
        link_length_1: float = 1.2,
        link_mass_1: float = 1.2,
        link_length_2: float = 0.8,
        link_mass_2: float = 0.8,
    ) -> None:
        super().__init__(render_mode=render_mode)
        for name, value in (
            ("gravity", gravity),
            ("link_length_1", link_length_1),
            ("link_mass_1", link_mass_1),
            ("link_length_2", link_length_2),
            ("link_mass_2", link_mass_2),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.gravity = float(gravity)
        # Instance attributes shadow the class constants the base class reads.
        self.LINK_LENGTH_1 = float(link_length_1)
        self.LINK_MASS_1 = float(link_mass_1)
        self.LINK_LENGTH_2 = float(link_length_2)
        self.LINK_MASS_2 = float(link_mass_2)

    def _dsdt(self, s_augmented: np.ndarray) -> tuple[float, float, float, float, float]:
        """Time derivative of ``[theta1, theta2, dtheta1, dtheta2, torque]`` (torque is held constant).

        The two-link underactuated pendulum of Sutton & Barto (2018), sec. 11.3, with g taken from ``self.gravity``.
        """
        m1, m2 = self.LINK_MASS_1, self.LINK_MASS_2
        l1 = self.LINK_LENGTH_1
        lc1, lc2 = self.LINK_COM_POS_1, self.LINK_COM_POS_2
        inertia1 = inertia2 = self.LINK_MOI
        g = self.gravity
        torque = s_augmented[-1]
        theta1, theta2, dtheta1, dtheta2 = s_augmented[:4]
        # Generalized inertia terms d1, d2 and gravity/coriolis terms phi1, phi2 (S&B eq. in sec. 11.3).
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos(theta2)) + inertia1 + inertia2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos(theta2)) + inertia2
        phi2 = m2 * lc2 * g * cos(theta1 + theta2 - pi / 2.0)
        coriolis = -m2 * l1 * lc2 * sin(theta2) * (dtheta2**2 + 2 * dtheta2 * dtheta1)
        phi1 = coriolis + (m1 * lc1 + m2 * l1) * g * cos(theta1 - pi / 2.0) + phi2
        if self.book_or_nips == "nips":
            numerator = torque + d2 / d1 * phi1 - phi2
        else:
            # The "book" variant keeps the centripetal term of link 1 acting on link 2.
            numerator = torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin(theta2) - phi2
        ddtheta2 = numerator / (m2 * lc2**2 + inertia2 - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0


def _check_base(env_id: str) -> None:
    if env_id not in PERTURBED_IDS:
        raise ValueError(f"no perturbed version of {env_id!r}; supported: {sorted(PERTURBED_IDS)}")


def make_perturbed(env_id: str, physics: Mapping[str, float] | None = None) -> gym.Env:
    """Make the perturbed twin of ``env_id`` (with its usual time limit) under the given physics.

    Args:
        env_id: ``"MountainCar-v0"`` or ``"Acrobot-v1"``.
        physics: Physics parameters (keys of :data:`NOMINAL_PHYSICS` ``[env_id]``); missing keys take the nominal
            value. ``None`` means the nominal physics.

    Returns:
        A gymnasium env wrapped like ``gymnasium.make(env_id)`` (time limit 200 / 500 steps).
    """
    _check_base(env_id)
    params = dict(NOMINAL_PHYSICS[env_id])
    unknown = set(physics or {}) - set(params)
    if unknown:
        raise ValueError(f"unknown physics parameter(s) {sorted(unknown)} for {env_id}; known: {sorted(params)}")
    params.update({k: float(v) for k, v in (physics or {}).items()})
    import envs  # noqa: F401  (registers the rolloutlab/ ids)

    kwargs: dict[str, Any] = params
    return gym.make(PERTURBED_IDS[env_id], **kwargs)


def parse_physics(env_id: str, text: str) -> dict[str, float]:
    """Physics from a command line: ``test`` (the paper's perturbation), ``nominal``, or ``name=value`` pairs
    separated by commas or spaces (e.g. ``gravity=11,link_mass_1=1.3``), applied on top of the nominal physics.

    Raises:
        ValueError: An unknown env or parameter, a pair without ``=``, a repeated name, or a value that is not a
            positive finite number; the message lists the known parameters.
    """
    _check_base(env_id)
    choice = text.strip()
    if choice == "test":
        return dict(TEST_PHYSICS[env_id])
    if choice == "nominal":
        return dict(NOMINAL_PHYSICS[env_id])
    known = sorted(NOMINAL_PHYSICS[env_id])
    physics = dict(NOMINAL_PHYSICS[env_id])
    seen: set[str] = set()
    pairs = [part for part in choice.replace(",", " ").split() if part]
    if not pairs:
        raise ValueError(f"no physics given: use test, nominal or name=value pairs ({', '.join(known)})")
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"physics {pair!r}: use test, nominal or name=value pairs ({', '.join(known)})")
        if name not in physics:
            raise ValueError(f"unknown physics parameter {name!r} for {env_id}; known: {', '.join(known)}")
        if name in seen:
            raise ValueError(f"physics parameter {name!r} given twice")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"physics {pair!r}: {value!r} is not a number") from None
        if not (np.isfinite(number) and number > 0):
            raise ValueError(f"physics {pair!r}: the value must be a positive finite number")
        seen.add(name)
        physics[name] = number
    return physics


def env_factory(env_id: str, physics: Mapping[str, float] | None = None) -> Callable[[], gym.Env]:
    """A picklable zero-argument factory for :func:`make_perturbed` (for vector envs and worker processes)."""
    _check_base(env_id)
    return functools.partial(make_perturbed, env_id, dict(physics) if physics is not None else None)


@dataclass
class PhysicsSampler:
    """Domain randomization: draws physics parameters uniformly from per-parameter ranges.

    Attributes:
        env_id: ``"MountainCar-v0"`` or ``"Acrobot-v1"``.
        ranges: ``{parameter: (low, high)}``; ``None`` means :data:`DEFAULT_RANGES` ``[env_id]``, an empty mapping
            means no randomization (always the nominal physics).
    """

    env_id: str
    ranges: dict[str, tuple[float, float]] | None = None

    def __post_init__(self) -> None:
        _check_base(self.env_id)
        if self.ranges is None:
            self.ranges = dict(DEFAULT_RANGES[self.env_id])
        for name, (low, high) in self.ranges.items():
            if name not in NOMINAL_PHYSICS[self.env_id]:
                raise ValueError(f"unknown physics parameter {name!r} for {self.env_id}")
            if not 0 < low <= high:
                raise ValueError(f"range for {name} must satisfy 0 < low <= high, got ({low}, {high})")

    def sample(self, rng: np.random.Generator) -> dict[str, float]:
        """One physics draw: nominal values with every randomized parameter replaced by a uniform draw."""
        physics = dict(NOMINAL_PHYSICS[self.env_id])
        assert self.ranges is not None  # set in __post_init__
        for name in sorted(self.ranges):
            low, high = self.ranges[name]
            physics[name] = float(rng.uniform(low, high))
        return physics
