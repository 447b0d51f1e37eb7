"""World models: a Gaussian MLP ensemble vectorized over members, normalizers and the training loop around them."""

from __future__ import annotations

from mbrl.models.dynamics import DynamicsModel, ModelConfig, ModelStep, default_weight_decays
from mbrl.models.gaussian_ensemble import EnsembleLinear, GaussianEnsemble, gaussian_nll
from mbrl.models.normalizer import Normalizer
from mbrl.models.propagator import MemberPropagator
from mbrl.models.termination_head import TerminationHead

__all__ = [
    "DynamicsModel",
    "EnsembleLinear",
    "GaussianEnsemble",
    "MemberPropagator",
    "ModelConfig",
    "ModelStep",
    "Normalizer",
    "TerminationHead",
    "default_weight_decays",
    "gaussian_nll",
]
