"""Halting controllers: how many recurrent iterations (so how many latent tokens) one image gets.

The tokenizer runs its iterations one at a time; after iteration ``t`` a :class:`HaltingController` is shown

* ``iteration`` (int, ``>= 1``): iterations run so far;
* ``recon_error`` (float): MSE of the image's reconstruction from the tokens so far (the encoder has the image, so
  it can measure this while encoding);
* ``tokens`` (int): latent tokens held;
* ``features`` (sequence of floats, :class:`LearnedCount` only): the image's features after the first iteration
  (:func:`meta.tokenizer.evaluate.count_features`);

and decides ``True`` (halt: the tokens so far are the image's code) or ``False`` (run another iteration). Every
controller halts at its ``max_iterations``. Specs (grammar and registry: :mod:`meta.control.spec`):

* ``halt_fixed:N`` — :class:`FixedCount`: always ``N`` iterations, a fixed-length tokenizer;
* ``halt_error:THRESHOLD[,MAX]`` — :class:`ErrorThreshold`: ALIT's rule, halt at the first iteration whose
  reconstruction error is at most ``THRESHOLD`` (or at ``MAX``, default 8);
* ``halt_learned:PATH`` — :class:`LearnedCount`: a ridge regressor saved as JSON (:meth:`CountPredictor.save`) predicts
  from the first iteration's features the count :class:`ErrorThreshold` would reach, and the image gets that many.

Numpy only, like the rest of the controller layer.
"""

from __future__ import annotations

import json
import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from meta.control.protocol import Controller, Feedback, require
from meta.control.spec import HALTING, Spec, build_spec

__all__ = [
    "CountPredictor",
    "ErrorThreshold",
    "FixedCount",
    "HaltingController",
    "LearnedCount",
    "halting_iterations",
    "make_halting",
]


class HaltingController(Controller):
    """A controller whose decision, after each recurrent iteration of one image, is ``True`` to halt."""

    @abstractmethod
    def decide(self, feedback: Feedback) -> bool:
        """Whether to halt after ``feedback["iteration"]`` iterations."""

    @abstractmethod
    def max_iterations(self) -> int:
        """The iteration at which this controller always halts."""


class FixedCount(HaltingController):
    """Always ``n`` iterations: the fixed-length tokenizer the adaptive ones are compared with."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a fixed count needs at least 1 iteration, got {n}")
        self.n = int(n)

    def decide(self, feedback: Feedback) -> bool:
        return int(require(feedback, "iteration", "FixedCount")) >= self.n

    def max_iterations(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"FixedCount({self.n})"


class ErrorThreshold(HaltingController):
    """ALIT's halting rule: stop once the reconstruction error is at most ``threshold`` (or at ``max_iters``).

    Args:
        threshold: Reconstruction MSE (grey levels in ``[0, 1]``) below which an image's code is good enough.
        max_iters: The last iteration the tokenizer runs.
    """

    def __init__(self, threshold: float, max_iters: int = 8) -> None:
        if not threshold >= 0 or max_iters < 1:
            raise ValueError(
                f"need threshold >= 0 and max_iters >= 1, got threshold={threshold}, max_iters={max_iters}"
            )
        self.threshold = float(threshold)
        self.max_iters = int(max_iters)

    def decide(self, feedback: Feedback) -> bool:
        iteration = int(require(feedback, "iteration", "ErrorThreshold"))
        error = float(require(feedback, "recon_error", "ErrorThreshold"))
        return error <= self.threshold or iteration >= self.max_iters

    def max_iterations(self) -> int:
        return self.max_iters

    def __repr__(self) -> str:
        return f"ErrorThreshold({self.threshold:g}, {self.max_iters})"


@dataclass
class CountPredictor:
    """Ridge regression from standardized image features to an iteration count.

    Attributes:
        mean: ``(F,)`` feature means of the training images.
        scale: ``(F,)`` feature standard deviations (1 where a feature is constant).
        weights: ``(F,)`` coefficients on the standardized features.
        bias: Intercept (the mean target count).
        max_iters: Counts are rounded and clipped to ``1..max_iters``.
        threshold: The error threshold whose counts the predictor was fitted to (for the record).
    """

    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    max_iters: int
    threshold: float

    @classmethod
    def fit(
        cls, features: np.ndarray, counts: np.ndarray, max_iters: int, threshold: float, ridge: float = 1.0
    ) -> CountPredictor:
        """Fit to ``(N, F)`` features and ``(N,)`` target counts (closed-form ridge on standardized features)."""
        x = np.asarray(features, dtype=np.float64)
        y = np.asarray(counts, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
            raise ValueError(f"need (N, F) features and N counts, N >= 1; got {x.shape} and {y.shape}")
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale == 0] = 1.0
        z = (x - mean) / scale
        bias = float(y.mean())
        weights = np.linalg.solve(z.T @ z + ridge * np.eye(z.shape[1]), z.T @ (y - bias))
        return cls(mean.tolist(), scale.tolist(), weights.tolist(), bias, int(max_iters), float(threshold))

    def predict(self, features: Sequence[float] | np.ndarray) -> np.ndarray:
        """Predicted counts for ``(F,)`` or ``(N, F)`` features, rounded and clipped to ``1..max_iters``."""
        z = (np.asarray(features, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        raw = z @ np.asarray(self.weights) + self.bias
        return np.clip(np.rint(raw), 1, self.max_iters).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "scale": self.scale,
            "weights": self.weights,
            "bias": self.bias,
            "max_iters": self.max_iters,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "count predictor") -> CountPredictor:
        """Rebuild from :meth:`to_dict`'s plain data, checking its keys and lengths."""
        keys = {"mean", "scale", "weights", "bias", "max_iters", "threshold"}
        if not isinstance(data, Mapping) or set(data) != keys:
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"{source} must hold exactly the keys {sorted(keys)}, got {got}")
        lengths = {len(data["mean"]), len(data["scale"]), len(data["weights"])}
        if len(lengths) != 1:
            raise ValueError(f"{source}: mean, scale and weights must have one length, got {sorted(lengths)}")
        return cls(
            mean=[float(v) for v in data["mean"]],
            scale=[float(v) for v in data["scale"]],
            weights=[float(v) for v in data["weights"]],
            bias=float(data["bias"]),
            max_iters=int(data["max_iters"]),
            threshold=float(data["threshold"]),
        )

    def save(self, path: str | Path) -> Path:
        """Write the predictor as JSON (the file ``halt_learned:PATH`` reads)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> CountPredictor:
        """Read a predictor written by :meth:`save` (JSON only; nothing is unpickled)."""
        source = Path(path)
        if not source.is_file():
            raise ValueError(f"count predictor file not found: {source}")
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"count predictor file {source} is not JSON: {exc}") from exc
        return cls.from_dict(data, source=str(source))


class LearnedCount(HaltingController):
    """Decide the whole count after the first iteration with a :class:`CountPredictor`, then run that many.

    Cheaper than :class:`ErrorThreshold` at encoding time: the reconstruction error is measured once, not after every
    iteration. Its state is the count decided for the image in progress (``None`` before the first iteration).
    """

    def __init__(self, predictor: CountPredictor) -> None:
        self.predictor = predictor
        self.target: int | None = None

    def decide(self, feedback: Feedback) -> bool:
        iteration = int(require(feedback, "iteration", "LearnedCount"))
        if iteration == 1 or self.target is None:
            features = require(feedback, "features", "LearnedCount")
            self.target = int(self.predictor.predict(features))
        return iteration >= self.target

    def reset(self) -> None:
        self.target = None

    def max_iterations(self) -> int:
        return self.predictor.max_iters

    def state_dict(self) -> dict[str, Any]:
        return {"target": self.target}

    def __repr__(self) -> str:
        return f"LearnedCount(threshold={self.predictor.threshold:g}, max={self.predictor.max_iters})"


def halting_iterations(
    controller: HaltingController, errors: np.ndarray, features: np.ndarray | None = None
) -> np.ndarray:
    """Ask ``controller`` image by image, iteration by iteration, how many iterations each image gets.

    Args:
        controller: Reset before each image.
        errors: ``(N, T)`` reconstruction MSE of each image after each iteration ``1..T``.
        features: ``(N, F)`` first-iteration features (needed by :class:`LearnedCount`).

    Returns:
        ``(N,)`` iterations per image, in ``1..T`` (a controller that has not halted by ``T`` gets ``T``).
    """
    errors = np.asarray(errors, dtype=np.float64)
    n, horizon = errors.shape
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        controller.reset()
        out[i] = horizon
        for t in range(1, horizon + 1):
            feedback: dict[str, Any] = {"iteration": t, "recon_error": float(errors[i, t - 1])}
            if features is not None:
                feedback["features"] = features[i]
            if controller.decide(feedback):
                out[i] = t
                break
    return out


# --- specs -------------------------------------------------------------------------------------------------------


def fixed_from_spec(spec: Spec) -> FixedCount:
    """``halt_fixed:N``."""
    (n,) = spec.integers("N", 1, 1)
    return FixedCount(n)


def error_from_spec(spec: Spec) -> ErrorThreshold:
    """``halt_error:THRESHOLD[,MAX]``."""
    values = spec.numbers("THRESHOLD[,MAX]", 1, 2, whole=(1,))
    threshold, max_iters = values[0], int(values[1]) if len(values) > 1 else 8
    if not math.isfinite(threshold) or threshold < 0 or max_iters < 1:
        raise ValueError(f"halting spec {spec.text!r}: need THRESHOLD >= 0 and MAX >= 1 (THRESHOLD[,MAX])")
    return ErrorThreshold(threshold, max_iters)


def learned_from_spec(spec: Spec) -> LearnedCount:
    """``halt_learned:PATH`` (a JSON file written by :meth:`CountPredictor.save`)."""
    if not spec.raw_args:
        raise ValueError(f"halting spec {spec.text!r} takes PATH, the count predictor's JSON file")
    return LearnedCount(CountPredictor.load(spec.raw_args))


def make_halting(spec: str) -> HaltingController:
    """Build a halting controller from a spec: ``halt_fixed:4``, ``halt_error:0.01,8``, ``halt_learned:PATH``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(HALTING, spec)
    if not isinstance(controller, HaltingController):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a halting controller")
    return controller
