"""True-simulator world models: Acrobot's, CartPole's and discrete Pendulum's own physics behind the world-model
interface.

:class:`TrueAcrobotModel` has the :meth:`~mbrl.models.dynamics.DynamicsModel.predict` contract of the learned model
(and no-op ``fit`` / ``restore_last_good`` / ``state_dict``), so a Dyna learner can plan in the real dynamics instead
of a learned ensemble. That separates the two sources of error in model-based RL: with a perfect model, what is left
is the planner's and the rollout schedule's own.

The physics is gymnasium 1.x's ``AcrobotEnv`` (Sutton & Barto 2018, sec. 11.3; Sutton 1996), vectorized over ``N``
samples: the joint angles are recovered from the observation's (cos, sin) pairs, the discrete action picks a torque
from ``{-1, 0, +1}`` N m, the equations of motion (the "book" variant by default, as gymnasium) are integrated over
one step of ``dt = 0.2`` s with one classical fourth-order Runge-Kutta step, the angles are wrapped into
``[-pi, pi]`` and the angular velocities clipped to ``±4 pi`` and ``±9 pi`` rad/s. The reward is -1 per step and 0 on
the step that reaches the goal height, tested with :func:`mbrl.termination.acrobot` on the predicted observation (the
rule callers use for ``terminated``, so reward and termination agree; only a caller that rounds the observation to
float32 first could see them differ, within float32 rounding of the goal height).

The physics constants are constructor arguments, defaulting to Acrobot-v1's; :meth:`TrueAcrobotModel.from_env`
reads them off an environment, including the perturbed-physics ``envs.perturbed.PerturbedAcrobotEnv``.
:class:`TrueCartPoleModel` and :class:`TruePendulumModel` do the same for ``CartPole-v1`` and
``rolloutlab/DiscretePendulum-v0``. Each has a ``perturbed`` copy with scaled physics or an angle-sensor error, the
wrong models of the rollout-length headroom gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Self

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from mbrl.models.dynamics import ModelStep
from mbrl.termination import acrobot as acrobot_terminated

#: Gravitational acceleration hard-coded in gymnasium's ``AcrobotEnv._dsdt`` [m/s^2].
GYMNASIUM_GRAVITY = 9.8

#: Wrapping loops this many times at most before falling back to modular arithmetic (see :func:`_wrap`).
_MAX_WRAP_LOOPS = 8


def _wrap(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Wrap ``x`` into ``[low, high]`` by whole periods, as gymnasium's ``wrap``: subtract (add) ``high - low`` while
    above (below) the range.

    Repeating the same subtractions keeps the rounding of gymnasium's loop. A value still out of range after
    :data:`_MAX_WRAP_LOOPS` periods (only reachable from absurd input velocities) is reduced with ``np.mod`` instead
    of looping for ever; non-finite values are left as they are (gymnasium would hang on ``inf``).

    Args:
        x: ``[N]`` angles in rad.
        low: Lower end of the range (``-pi``).
        high: Upper end of the range (``pi``).

    Returns:
        ``[N]`` wrapped angles (a new array).
    """
    period = high - low
    out = np.array(x, dtype=np.float64, copy=True)
    finite = np.isfinite(out)
    for _ in range(_MAX_WRAP_LOOPS):
        above = finite & (out > high)
        if not above.any():
            break
        out[above] -= period
    for _ in range(_MAX_WRAP_LOOPS):
        below = finite & (out < low)
        if not below.any():
            break
        out[below] += period
    far = finite & ((out > high) | (out < low))
    if far.any():
        out[far] = low + np.mod(out[far] - low, period)
    return out


class ExactSimulatorModel:
    """What every exact simulator used as a world model shares: nothing to learn, save or restore.

    Subclasses (:class:`TrueAcrobotModel`, :class:`TruePendulumModel`) implement ``predict`` with the environment's own
    equations; this base gives them ``DynamicsModel``'s remaining interface as no-ops and the :class:`ModelStep` they
    return (no termination head, zero disagreement: one exact member).
    """

    obs_dim: int
    action_dim: int
    #: The constructor arguments :meth:`perturbed` may scale (positive physics constants).
    SCALABLE: tuple[str, ...] = ()

    def physics(self) -> dict[str, Any]:
        """The constructor arguments (subclasses), including ``angle_offset``."""
        raise NotImplementedError

    def perturbed(self, scales: Mapping[str, float], *, angle_offset: float | None = None) -> Self:
        """A copy whose physics constants are multiplied by ``scales`` (e.g. ``{"gravity": 1 + delta}``).

        Args:
            scales: Factor per name in :attr:`SCALABLE`.
            angle_offset: The copy's angle-sensor error in rad (``None``: this model's).

        Raises:
            ValueError: A name that is not in :attr:`SCALABLE`.
        """
        unknown = sorted(set(scales) - set(self.SCALABLE))
        if unknown:
            raise ValueError(f"unknown physics parameters {unknown}; known: {sorted(self.SCALABLE)}")
        params = self.physics()
        params.update({k: params[k] * float(v) for k, v in scales.items()})
        if angle_offset is not None:
            params["angle_offset"] = float(angle_offset)
        return type(self)(**params)

    def _checked_inputs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs`` as float64 ``[N, obs_dim]`` and ``actions`` as int64 ``[N]`` indices, checked."""
        obs64 = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        n = obs64.shape[0]
        raw = np.asarray(actions).reshape(-1)
        if raw.shape[0] != n:
            raise ValueError(f"got {raw.shape[0]} actions for {n} observations")
        idx = raw.astype(np.int64)
        if n and (np.any(idx != raw) or idx.min() < 0 or idx.max() >= self.action_dim):
            raise ValueError(f"actions must be integers in [0, {self.action_dim}), got {np.unique(raw)}")
        return obs64, idx

    @staticmethod
    def _model_step(next_obs: np.ndarray, reward: np.ndarray) -> ModelStep:
        return ModelStep(
            next_obs=next_obs,
            reward=reward,
            terminated_prob=None,
            disagreement=np.zeros(len(next_obs)),
            finite=np.isfinite(next_obs).all(axis=1),
        )

    def fit(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
    ) -> dict[str, float]:
        """Do nothing: the true dynamics have nothing to learn (signature of ``DynamicsModel.fit``).

        Args:
            obs: ``[N, obs_dim]``, ignored.
            actions: ``[N]``, ignored.
            rewards: ``[N]``, ignored.
            next_obs: ``[N, obs_dim]``, ignored.
            terminated: ``[N]``, ignored.

        Returns:
            An empty metrics dict: no holdout score is computed, so callers that read metrics with ``.get`` (the
            Dyna learner) log their default (NaN), and ones that index ``"model/holdout_nll"`` directly must not be
            given this model.
        """
        return {}

    def restore_last_good(self) -> None:
        """No-op: there are no weights that could diverge."""

    def state_dict(self) -> dict[str, Any]:
        """Empty: the model is fully described by its constructor arguments (see ``physics``)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Accept the empty snapshot :meth:`state_dict` makes.

        Raises:
            ValueError: ``state`` is not empty (e.g. a learned model's snapshot loaded into the wrong model).
        """
        if len(state):
            raise ValueError(f"{type(self).__name__} has no state to load, got keys {sorted(state)}")


class TrueAcrobotModel(ExactSimulatorModel):
    """Acrobot's exact dynamics as a world model, vectorized in numpy (float64).

    Units: lengths in m, masses in kg, moments of inertia in kg m^2, gravity in m/s^2, time in s, angles in rad,
    angular velocities in rad/s, torques in N m.

    Args:
        gravity: Gravitational acceleration (gymnasium hard-codes 9.8; perturbed variants change it).
        link_length_1: Length of link 1; enters the dynamics (shoulder-to-elbow distance).
        link_length_2: Length of link 2. Like gymnasium, the dynamics only use link 2's centre-of-mass position, so
            this value is kept for completeness (and :meth:`from_env`) but does not change predictions.
        link_mass_1: Mass of link 1.
        link_mass_2: Mass of link 2.
        link_com_pos_1: Distance from the shoulder to link 1's centre of mass.
        link_com_pos_2: Distance from the elbow to link 2's centre of mass.
        link_moi: Moment of inertia of each link about its centre of mass (gymnasium uses one value for both).
        dt: Integration step; one model step is one RK4 step of this length, as one ``env.step``.
        max_vel_1: Clip for ``dtheta1`` after each step (gymnasium: ``4 pi``).
        max_vel_2: Clip for ``dtheta2`` after each step (gymnasium: ``9 pi``).
        torques: Torque applied at the elbow for each discrete action (gymnasium: ``(-1, 0, +1)``).
        book_or_nips: ``"book"`` (Sutton & Barto's equations, gymnasium's default) or ``"nips"`` (Sutton 1996's,
            without link 1's centripetal term acting on link 2).
        torque_noise_max: Half-width of uniform noise added to the torque (gymnasium default 0: deterministic). When
            positive, :meth:`predict` draws the noise from its ``rng`` unless ``deterministic``.
        angle_offset: A miscalibrated shoulder-angle sensor, in rad (0: none): the model believes link 1 sits at
            ``theta1 + angle_offset`` when the observation says ``theta1``, so its gravity pulls toward, and its goal
            test (the tip above the bar, which sets its reward) looks at, a frame turned by the offset. Next
            observations are returned in the observation's frame. The real task is untouched by it.

    Attributes:
        obs_dim: 6, ``[cos t1, sin t1, cos t2, sin t2, dt1, dt2]``.
        action_dim: Number of discrete actions (3).
        discrete_actions: ``True``.
        fitted: Always ``True``: there is nothing to learn, so callers may plan from the first step.
    """

    obs_dim = 6
    discrete_actions = True
    SCALABLE = (
        "gravity",
        "link_length_1",
        "link_length_2",
        "link_mass_1",
        "link_mass_2",
        "link_com_pos_1",
        "link_com_pos_2",
        "link_moi",
        "dt",
        "max_vel_1",
        "max_vel_2",
    )

    def __init__(
        self,
        *,
        gravity: float = GYMNASIUM_GRAVITY,
        link_length_1: float = 1.0,
        link_length_2: float = 1.0,
        link_mass_1: float = 1.0,
        link_mass_2: float = 1.0,
        link_com_pos_1: float = 0.5,
        link_com_pos_2: float = 0.5,
        link_moi: float = 1.0,
        dt: float = 0.2,
        max_vel_1: float = 4 * math.pi,
        max_vel_2: float = 9 * math.pi,
        torques: Sequence[float] = (-1.0, 0.0, 1.0),
        book_or_nips: str = "book",
        torque_noise_max: float = 0.0,
        angle_offset: float = 0.0,
    ) -> None:
        if not math.isfinite(angle_offset):
            raise ValueError(f"angle_offset must be finite, got {angle_offset}")
        positive = {
            "gravity": gravity,
            "link_length_1": link_length_1,
            "link_length_2": link_length_2,
            "link_mass_1": link_mass_1,
            "link_mass_2": link_mass_2,
            "link_com_pos_1": link_com_pos_1,
            "link_com_pos_2": link_com_pos_2,
            "link_moi": link_moi,
            "dt": dt,
            "max_vel_1": max_vel_1,
            "max_vel_2": max_vel_2,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value}")
        if book_or_nips not in ("book", "nips"):
            raise ValueError(f"book_or_nips must be 'book' or 'nips', got {book_or_nips!r}")
        if not torque_noise_max >= 0:
            raise ValueError(f"torque_noise_max must be >= 0, got {torque_noise_max}")
        if len(torques) == 0:
            raise ValueError("torques must name at least one action")
        self.gravity = float(gravity)
        self.link_length_1, self.link_length_2 = float(link_length_1), float(link_length_2)
        self.link_mass_1, self.link_mass_2 = float(link_mass_1), float(link_mass_2)
        self.link_com_pos_1, self.link_com_pos_2 = float(link_com_pos_1), float(link_com_pos_2)
        self.link_moi = float(link_moi)
        self.dt = float(dt)
        self.max_vel_1, self.max_vel_2 = float(max_vel_1), float(max_vel_2)
        self.torques = np.asarray(torques, dtype=np.float64).reshape(-1)
        self.book_or_nips = book_or_nips
        self.torque_noise_max = float(torque_noise_max)
        self.angle_offset = float(angle_offset)
        self.action_dim = int(self.torques.shape[0])
        self.fitted = True

    @classmethod
    def from_env(cls, env: gym.Env[Any, Any]) -> TrueAcrobotModel:
        """The model of ``env``'s physics, read off ``env.unwrapped`` (wrappers are looked through).

        Reads the class constants gymnasium's ``AcrobotEnv`` uses (``LINK_*``, ``MAX_VEL_*``, ``AVAIL_TORQUE``,
        ``dt``, ``book_or_nips``, ``torque_noise_max``; instance attributes shadow them, which is how
        ``envs.perturbed.PerturbedAcrobotEnv`` perturbs link lengths and masses). Gravity is the 9.8 hard-coded in
        gymnasium's equations of motion unless the env class overrides ``_dsdt`` and has a ``gravity`` attribute, as
        ``PerturbedAcrobotEnv`` does.

        Raises:
            TypeError: ``env.unwrapped`` is not an ``AcrobotEnv``, or it overrides ``_dsdt`` without a ``gravity``
                attribute (the model cannot know its equations).
        """
        u = env.unwrapped
        if not isinstance(u, AcrobotEnv):
            raise TypeError(f"from_env needs an AcrobotEnv, got {type(u).__name__}")
        if type(u)._dsdt is AcrobotEnv._dsdt:
            gravity = GYMNASIUM_GRAVITY  # any `gravity` attribute would be ignored by the env's own equations
        elif hasattr(u, "gravity"):
            # Assumes the override states the same equations with gravity as a parameter (PerturbedAcrobotEnv).
            gravity = float(getattr(u, "gravity"))  # noqa: B009  (not an attribute of AcrobotEnv's type)
        else:
            raise TypeError(f"{type(u).__name__} overrides _dsdt without a `gravity` attribute; pass the physics")
        return cls(
            gravity=gravity,
            link_length_1=u.LINK_LENGTH_1,
            link_length_2=u.LINK_LENGTH_2,
            link_mass_1=u.LINK_MASS_1,
            link_mass_2=u.LINK_MASS_2,
            link_com_pos_1=u.LINK_COM_POS_1,
            link_com_pos_2=u.LINK_COM_POS_2,
            link_moi=u.LINK_MOI,
            dt=u.dt,
            max_vel_1=u.MAX_VEL_1,
            max_vel_2=u.MAX_VEL_2,
            torques=[float(t) for t in u.AVAIL_TORQUE],
            book_or_nips=u.book_or_nips,
            torque_noise_max=u.torque_noise_max,
        )

    def physics(self) -> dict[str, Any]:
        """The constructor arguments, e.g. for logging which physics a run planned in."""
        return {
            "gravity": self.gravity,
            "link_length_1": self.link_length_1,
            "link_length_2": self.link_length_2,
            "link_mass_1": self.link_mass_1,
            "link_mass_2": self.link_mass_2,
            "link_com_pos_1": self.link_com_pos_1,
            "link_com_pos_2": self.link_com_pos_2,
            "link_moi": self.link_moi,
            "dt": self.dt,
            "max_vel_1": self.max_vel_1,
            "max_vel_2": self.max_vel_2,
            "torques": self.torques.tolist(),
            "book_or_nips": self.book_or_nips,
            "torque_noise_max": self.torque_noise_max,
            "angle_offset": self.angle_offset,
        }

    # --- physics ----------------------------------------------------------------------------------------------

    def _derivatives(self, y: np.ndarray, torque: np.ndarray) -> np.ndarray:
        """Time derivative of the state under a constant elbow torque.

        Args:
            y: ``[N, 4]`` states ``(theta1, theta2, dtheta1, dtheta2)``.
            torque: ``[N]`` elbow torques.

        Returns:
            ``[N, 4]``: ``(dtheta1, dtheta2, ddtheta1, ddtheta2)``.
        """
        m1, m2 = self.link_mass_1, self.link_mass_2
        l1, lc1, lc2 = self.link_length_1, self.link_com_pos_1, self.link_com_pos_2
        inertia = self.link_moi
        g = self.gravity
        theta1, theta2, dtheta1, dtheta2 = y[:, 0], y[:, 1], y[:, 2], y[:, 3]
        cos2, sin2 = np.cos(theta2), np.sin(theta2)
        coupling = m2 * l1 * lc2  # the product that multiplies every link-1/link-2 interaction term
        # Generalized inertia: d1 for the whole arm about the shoulder, d2 for its coupling to the elbow.
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + 2 * inertia
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + inertia
        # Gravity terms. Angles are measured from hanging straight down, so gravity's torque goes with
        # cos(angle - pi/2) (gymnasium's form, kept for its rounding) = sin(angle).
        phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -coupling * dtheta2**2 * sin2
            - 2 * coupling * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - math.pi / 2.0)
            + phi2
        )
        effective_inertia_2 = m2 * lc2**2 + inertia - d2**2 / d1
        if self.book_or_nips == "book":
            # Sutton & Barto keep the centripetal effect of link 1's rotation on link 2.
            ddtheta2 = (torque + d2 / d1 * phi1 - coupling * dtheta1**2 * sin2 - phi2) / effective_inertia_2
        else:
            ddtheta2 = (torque + d2 / d1 * phi1 - phi2) / effective_inertia_2
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2], axis=1)

    def step_state(self, state: np.ndarray, torque: np.ndarray) -> np.ndarray:
        """One environment step from internal states: RK4 over ``dt``, then wrapping and velocity clipping.

        Args:
            state: ``[N, 4]`` ``(theta1, theta2, dtheta1, dtheta2)`` in rad and rad/s.
            torque: ``[N]`` elbow torques in N m, held constant over the step.

        Returns:
            ``[N, 4]`` next states, angles in ``[-pi, pi]``, velocities within ``±max_vel_1`` / ``±max_vel_2``.
        """
        y0 = np.asarray(state, dtype=np.float64).reshape(-1, 4)
        torque = np.asarray(torque, dtype=np.float64).reshape(-1)
        # One classical RK4 step of length dt, grouped as gymnasium's rk4 over t = [0, dt] groups it.
        h = self.dt
        half = h / 2.0
        k1 = self._derivatives(y0, torque)
        k2 = self._derivatives(y0 + half * k1, torque)
        k3 = self._derivatives(y0 + half * k2, torque)
        k4 = self._derivatives(y0 + h * k3, torque)
        y1 = y0 + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        y1[:, 0] = _wrap(y1[:, 0], -math.pi, math.pi)
        y1[:, 1] = _wrap(y1[:, 1], -math.pi, math.pi)
        # min(max(.)) rather than np.clip so that the operation order is the env's (and NaN stays NaN).
        y1[:, 2] = np.minimum(np.maximum(y1[:, 2], -self.max_vel_1), self.max_vel_1)
        y1[:, 3] = np.minimum(np.maximum(y1[:, 3], -self.max_vel_2), self.max_vel_2)
        return y1

    @staticmethod
    def state_from_obs(obs: np.ndarray) -> np.ndarray:
        """``[N, 6]`` observations -> ``[N, 4]`` states; angles by ``arctan2`` (in ``[-pi, pi]``), velocities as is."""
        obs = np.asarray(obs, dtype=np.float64).reshape(-1, 6)
        return np.stack(
            [np.arctan2(obs[:, 1], obs[:, 0]), np.arctan2(obs[:, 3], obs[:, 2]), obs[:, 4], obs[:, 5]], axis=1
        )

    @staticmethod
    def obs_from_state(state: np.ndarray) -> np.ndarray:
        """``[N, 4]`` states -> ``[N, 6]`` observations ``[cos t1, sin t1, cos t2, sin t2, dt1, dt2]`` (float64)."""
        state = np.asarray(state, dtype=np.float64).reshape(-1, 4)
        t1, t2 = state[:, 0], state[:, 1]
        return np.stack([np.cos(t1), np.sin(t1), np.cos(t2), np.sin(t2), state[:, 2], state[:, 3]], axis=1)

    # --- the DynamicsModel interface --------------------------------------------------------------------------

    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> ModelStep:
        """One exact step of the environment for each of ``N`` (observation, action) pairs.

        Args:
            obs: ``[N, 6]`` observations (float32 observations are used as float64; their angles are only as
                precise as float32 cos/sin pairs, about 1e-7 rad).
            actions: ``[N]`` (or ``[N, 1]``) integer actions, indices into ``torques``.
            rng: Draws torque noise when ``torque_noise_max > 0`` and not ``deterministic``; otherwise unused
                (nothing is drawn, so the caller's generator advances exactly as without a model call).
            deterministic: Skip the torque noise (irrelevant at the default ``torque_noise_max = 0``).
            disagreement_rows: Unused (a single exact model has no disagreement to compute).

        Returns:
            A :class:`~mbrl.models.dynamics.ModelStep` with ``next_obs [N, 6]`` (float64), ``reward [N]`` (-1, or 0
            where the next observation is terminal), ``terminated_prob = None`` (callers apply
            :func:`mbrl.termination.acrobot`), ``disagreement [N]`` zeros (one exact model) and ``finite [N]``.

        Raises:
            ValueError: ``actions`` has the wrong length or holds an index outside ``[0, action_dim)``.
        """
        obs64, idx = self._checked_inputs(obs, actions)
        torque = self.torques[idx]
        if self.torque_noise_max > 0 and not deterministic:
            torque = torque + rng.uniform(-self.torque_noise_max, self.torque_noise_max, size=len(idx))
        state = self.state_from_obs(obs64)
        if not self.angle_offset:
            next_obs = self.obs_from_state(self.step_state(state, torque))
            # Terminal test on the next observation with the same function callers use for `terminated`.
            reward = np.where(acrobot_terminated(obs64, idx, next_obs), 0.0, -1.0)
            return self._model_step(next_obs, reward)
        state[:, 0] = _wrap(state[:, 0] + self.angle_offset, -math.pi, math.pi)  # the angle the model believes in
        believed = self.step_state(state, torque)
        reward = np.where(acrobot_terminated(obs64, idx, self.obs_from_state(believed)), 0.0, -1.0)
        believed[:, 0] = _wrap(believed[:, 0] - self.angle_offset, -math.pi, math.pi)  # the observation's frame
        return self._model_step(self.obs_from_state(believed), reward)


class TruePendulumModel(ExactSimulatorModel):
    """Pendulum's dynamics as a world model, vectorized in numpy (float64), for ``envs.pendulum.DiscretePendulumEnv``.

    One step is gymnasium's ``PendulumEnv.step``: ``dtheta' = clip(dtheta + (3 g / (2 l) sin theta + 3 u / (m l^2))
    dt, ±max_speed)``, ``theta' = theta + dtheta' dt``, reward ``-(normalize(theta)^2 + 0.1 dtheta^2 + 0.001 u^2)``
    from the state before the step. The angle is recovered from the observation's (cos, sin) pair. The reward does not
    depend on the physics parameters, so a model with wrong physics (:meth:`perturbed`) errs in its next states only.

    ``angle_offset`` models a miscalibrated angle sensor: the model believes the pendulum sits at ``theta +
    angle_offset`` when the observation says ``theta``, so its gravity pulls toward, and its reward pays for, an
    upright position that is off by the offset, in its next states and in its rewards. At ``angle_offset = 0`` it is
    the env's own step. Unlike a wrong gravity or mass, the offset leaves the real task unchanged, so a learner that
    never queries the model scores the same whatever the offset.

    Units: g in m/s^2, m in kg, l in m, dt in s, angles in rad, angular velocities in rad/s, torques in N m.

    Args:
        g: Gravitational acceleration.
        m: Mass.
        l: Length.
        dt: Time step.
        max_torque: Largest torque magnitude; the discrete actions are ``num_actions`` evenly spaced torques over
            ``[-max_torque, max_torque]`` (as the env's).
        max_speed: Angular-velocity clip.
        num_actions: Number of torque levels.
        angle_offset: The model's angle-sensor error in rad (0: none).

    Attributes:
        obs_dim: 3, ``[cos theta, sin theta, dtheta]``.
        action_dim: ``num_actions``.
        discrete_actions: ``True``.
        fitted: Always ``True``.
    """

    obs_dim = 3
    discrete_actions = True
    SCALABLE = ("g", "m", "l", "dt", "max_speed")

    def __init__(
        self,
        *,
        g: float = 10.0,
        m: float = 1.0,
        l: float = 1.0,  # noqa: E741  (gymnasium's name for the length)
        dt: float = 0.05,
        max_torque: float = 2.0,
        max_speed: float = 8.0,
        num_actions: int = 5,
        angle_offset: float = 0.0,
    ) -> None:
        if not math.isfinite(angle_offset):
            raise ValueError(f"angle_offset must be finite, got {angle_offset}")
        for name, value in (
            ("g", g),
            ("m", m),
            ("l", l),
            ("dt", dt),
            ("max_torque", max_torque),
            ("max_speed", max_speed),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value}")
        if num_actions < 2:
            raise ValueError(f"need at least 2 torque levels, got {num_actions}")
        self.g, self.m, self.l, self.dt = float(g), float(m), float(l), float(dt)
        self.max_torque, self.max_speed = float(max_torque), float(max_speed)
        self.torques = np.linspace(-self.max_torque, self.max_torque, int(num_actions))
        self.action_dim = int(num_actions)
        self.angle_offset = float(angle_offset)
        self.fitted = True

    @classmethod
    def from_env(cls, env: gym.Env[Any, Any]) -> TruePendulumModel:
        """The model of a ``DiscretePendulumEnv``'s physics, read off ``env.unwrapped``.

        Raises:
            TypeError: ``env.unwrapped`` has no discrete torque levels (``torques``) or no Pendulum physics.
        """
        u: Any = env.unwrapped
        if not all(hasattr(u, name) for name in ("torques", "g", "m", "l", "dt", "max_torque", "max_speed")):
            raise TypeError(f"from_env needs a DiscretePendulumEnv, got {type(u).__name__}")
        return cls(
            g=u.g, m=u.m, l=u.l, dt=u.dt, max_torque=u.max_torque, max_speed=u.max_speed, num_actions=len(u.torques)
        )

    def physics(self) -> dict[str, float]:
        """The constructor arguments."""
        return {
            "g": self.g,
            "m": self.m,
            "l": self.l,
            "dt": self.dt,
            "max_torque": self.max_torque,
            "max_speed": self.max_speed,
            "num_actions": float(self.action_dim),
            "angle_offset": self.angle_offset,
        }

    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> ModelStep:
        """One step of this model's physics for each of ``N`` (observation, action) pairs.

        Args:
            obs: ``[N, 3]`` observations.
            actions: ``[N]`` (or ``[N, 1]``) integer actions, indices into ``torques``.
            rng: Unused (the dynamics are deterministic; nothing is drawn).
            deterministic: Unused.
            disagreement_rows: Unused (a single exact model has no disagreement to compute).

        Returns:
            A :class:`~mbrl.models.dynamics.ModelStep` with ``next_obs [N, 3]`` (float64), ``reward [N]``,
            ``terminated_prob = None`` (Pendulum never terminates), ``disagreement [N]`` zeros and ``finite [N]``.

        Raises:
            ValueError: ``actions`` has the wrong length or holds an index outside ``[0, action_dim)``.
        """
        obs64, idx = self._checked_inputs(obs, actions)
        u = self.torques[idx]
        theta, dtheta = np.arctan2(obs64[:, 1], obs64[:, 0]), obs64[:, 2]
        if self.angle_offset:
            # The angle the model believes in, normalized to [-pi, pi) as gymnasium normalizes it for the reward.
            theta = np.mod(theta + self.angle_offset + np.pi, 2 * np.pi) - np.pi
        # arctan2 already lies in [-pi, pi]: gymnasium's angle_normalize of it is the identity (up to the sign of pi).
        reward = -(theta**2 + 0.1 * dtheta**2 + 0.001 * u**2)
        new_dtheta = dtheta + (3 * self.g / (2 * self.l) * np.sin(theta) + 3.0 / (self.m * self.l**2) * u) * self.dt
        new_dtheta = np.clip(new_dtheta, -self.max_speed, self.max_speed)
        new_theta = theta + new_dtheta * self.dt - self.angle_offset  # back in the observation's frame
        next_obs = np.stack([np.cos(new_theta), np.sin(new_theta), new_dtheta], axis=1)
        return self._model_step(next_obs, reward)


class TrueCartPoleModel(ExactSimulatorModel):
    """CartPole's dynamics as a world model, vectorized in numpy (float64), for gymnasium's ``CartPole-v1``.

    One step is ``CartPoleEnv.step`` with its Euler integrator: the pole's angular acceleration from gravity, the
    push and the cart's coupling, then position and angle advanced with the velocities from before the step. The
    reward is gymnasium's 1 per step; where an episode ends is the caller's known termination function
    (:func:`mbrl.termination.cartpole`), as for the env.

    ``angle_offset`` models a miscalibrated pole-angle sensor: the model believes the pole leans ``theta +
    angle_offset`` when the observation says ``theta``, so gravity tips it the wrong way in the model's next states
    (returned in the observation's frame). The real task is untouched by it.

    Units: gravity in m/s^2, masses in kg, half pole length in m, force in N, tau in s, angles in rad.

    Args:
        gravity: Gravitational acceleration.
        masscart: Mass of the cart.
        masspole: Mass of the pole.
        length: Half the pole's length (gymnasium's ``length``).
        force_mag: Magnitude of the push of either action (action 1 pushes right, 0 left).
        tau: Time step.
        angle_offset: The model's pole-angle sensor error in rad (0: none).

    Attributes:
        obs_dim: 4, ``[x, x_dot, theta, theta_dot]``.
        action_dim: 2.
        discrete_actions: ``True``.
        fitted: Always ``True``.
    """

    obs_dim = 4
    action_dim = 2
    discrete_actions = True
    SCALABLE = ("gravity", "masscart", "masspole", "length", "force_mag", "tau")

    def __init__(
        self,
        *,
        gravity: float = 9.8,
        masscart: float = 1.0,
        masspole: float = 0.1,
        length: float = 0.5,
        force_mag: float = 10.0,
        tau: float = 0.02,
        angle_offset: float = 0.0,
    ) -> None:
        if not math.isfinite(angle_offset):
            raise ValueError(f"angle_offset must be finite, got {angle_offset}")
        for name, value in (
            ("gravity", gravity),
            ("masscart", masscart),
            ("masspole", masspole),
            ("length", length),
            ("force_mag", force_mag),
            ("tau", tau),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value}")
        self.gravity, self.masscart, self.masspole = float(gravity), float(masscart), float(masspole)
        self.length, self.force_mag, self.tau = float(length), float(force_mag), float(tau)
        self.angle_offset = float(angle_offset)
        self.fitted = True

    @classmethod
    def from_env(cls, env: gym.Env[Any, Any]) -> TrueCartPoleModel:
        """The model of a ``CartPoleEnv``'s physics, read off ``env.unwrapped``.

        Raises:
            TypeError: ``env.unwrapped`` is not a ``CartPoleEnv`` with the Euler integrator.
        """
        u = env.unwrapped
        if not isinstance(u, CartPoleEnv) or u.kinematics_integrator != "euler":
            raise TypeError(f"from_env needs a CartPoleEnv with the euler integrator, got {type(u).__name__}")
        return cls(
            gravity=u.gravity,
            masscart=u.masscart,
            masspole=u.masspole,
            length=u.length,
            force_mag=u.force_mag,
            tau=u.tau,
        )

    def physics(self) -> dict[str, float]:
        """The constructor arguments."""
        return {
            "gravity": self.gravity,
            "masscart": self.masscart,
            "masspole": self.masspole,
            "length": self.length,
            "force_mag": self.force_mag,
            "tau": self.tau,
            "angle_offset": self.angle_offset,
        }

    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> ModelStep:
        """One step of this model's physics for each of ``N`` (observation, action) pairs.

        Args:
            obs: ``[N, 4]`` observations.
            actions: ``[N]`` (or ``[N, 1]``) integer actions (0: push left, 1: push right).
            rng: Unused (the dynamics are deterministic).
            deterministic: Unused.
            disagreement_rows: Unused.

        Returns:
            A :class:`~mbrl.models.dynamics.ModelStep` with ``next_obs [N, 4]`` (float64), ``reward [N]`` ones,
            ``terminated_prob = None`` (callers apply :func:`mbrl.termination.cartpole`), zero disagreement and
            ``finite [N]``.

        Raises:
            ValueError: ``actions`` has the wrong length or holds an index outside ``[0, 2)``.
        """
        obs64, idx = self._checked_inputs(obs, actions)
        x, x_dot, theta, theta_dot = obs64[:, 0], obs64[:, 1], obs64[:, 2] + self.angle_offset, obs64[:, 3]
        force = np.where(idx == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        # gymnasium's operation order, so that offset 0 reproduces the env's float64 state.
        temp = (force + polemass_length * np.square(theta_dot) * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        next_obs = np.stack(
            [
                x + self.tau * x_dot,
                x_dot + self.tau * xacc,
                theta + self.tau * theta_dot - self.angle_offset,
                theta_dot + self.tau * thetaacc,
            ],
            axis=1,
        )
        return self._model_step(next_obs, np.ones(len(next_obs)))
