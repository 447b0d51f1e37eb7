"""Specs of the RLVR controllers that act inside a group's sampling: HAPO (per token), EEPO (between halves), ARPO
(branches after tool results), EHPO (branches at high-entropy units).

``rolloutlab rlvr train --token-controller SPEC`` and :class:`meta.rlvr.trainers.run.GRPORunConfig.token_controller`
take

* ``hapo[:TAU,ALPHA[,QUANTILE]]`` — :class:`meta.rlvr.token.hapo.HAPO` (defaults 0.2, 1, 0.5);
* ``eepo[:LR[,ENTROPY_THRESHOLD]]`` — :class:`meta.rlvr.token.eepo.EEPO` (defaults 1e-3, always);
* ``arpo[:ALPHA,BETA[,K[,BRANCHES]]]`` — :class:`meta.rlvr.token.arpo.ARPO` (defaults 0.5, 1, 4, 2; the ``calc``
  family only, it branches after tool results);
* ``ehpo[:THRESHOLD,LAMBDA[,BRANCHES]]`` — :class:`meta.rlvr.token.ehpo.EHPO` (defaults 1, 0.1, 2).

The factories below are the ones :data:`meta.control.spec.SPECS` names; this module imports the controller classes
directly. Numpy only, like the rest of ``import meta.rlvr``.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.control.spec import TOKEN_CONTROLLER, Spec, build_spec
from meta.rlvr.token.arpo import ARPO
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.token.ehpo import EHPO
from meta.rlvr.token.hapo import HAPO

#: Token controllers a spec can build.
TokenController = HAPO | EEPO | ARPO | EHPO


def _with_defaults(spec: Spec, usage: str, defaults: Sequence[float], whole: Sequence[int] = ()) -> list[float]:
    """The spec's numbers, the missing trailing ones from ``defaults``."""
    values = spec.numbers(usage, 0, len(defaults), whole=whole)
    return values + list(defaults[len(values) :])


def hapo_from_spec(spec: Spec) -> HAPO:
    """``hapo[:TAU,ALPHA[,QUANTILE]]``."""
    tau, alpha, quantile = _with_defaults(spec, "TAU,ALPHA[,QUANTILE]", (0.2, 1.0, 0.5))
    return HAPO(tau=tau, alpha=alpha, quantile=quantile)


def eepo_from_spec(spec: Spec) -> EEPO:
    """``eepo[:LR[,ENTROPY_THRESHOLD]]``."""
    lr, threshold = _with_defaults(spec, "LR[,ENTROPY_THRESHOLD]", (1e-3, float("inf")))
    return EEPO(lr=lr, entropy_threshold=threshold)


def arpo_from_spec(spec: Spec) -> ARPO:
    """``arpo[:ALPHA,BETA[,K[,BRANCHES]]]`` (K and BRANCHES whole numbers)."""
    alpha, beta, k, branches = _with_defaults(spec, "ALPHA,BETA[,K[,BRANCHES]]", (0.5, 1.0, 4, 2), whole=(2, 3))
    return ARPO(alpha=alpha, beta=beta, k=int(k), branches=int(branches))


def ehpo_from_spec(spec: Spec) -> EHPO:
    """``ehpo[:THRESHOLD,LAMBDA[,BRANCHES]]`` (BRANCHES a whole number)."""
    threshold, coef, branches = _with_defaults(spec, "THRESHOLD,LAMBDA[,BRANCHES]", (1.0, 0.1, 2), whole=(2,))
    return EHPO(threshold=threshold, coef=coef, branches=int(branches))


def make_token_controller(spec: str) -> TokenController:
    """Build a token-level controller from a spec: ``hapo:0.2,1``, ``eepo:0.001,1.5``, ``arpo:0.5,1``, ``ehpo:1,0.1``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(TOKEN_CONTROLLER, spec)
    if not isinstance(controller, HAPO | EEPO | ARPO | EHPO):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a token controller")
    return controller
