"""Specs of the RLVR controllers that act inside a group's sampling: HAPO (per token), EEPO (between halves), ARPO
(branches after tool results), EHPO (branches at high-entropy units).

``rolloutlab rlvr train --token-controller SPEC`` and :class:`meta.rlvr.run.GRPORunConfig.token_controller` take

* ``hapo[:TAU,ALPHA[,QUANTILE]]`` — :class:`meta.rlvr.hapo.HAPO` (defaults 0.2, 1, 0.5);
* ``eepo[:LR[,ENTROPY_THRESHOLD]]`` — :class:`meta.rlvr.eepo.EEPO` (defaults 1e-3, always);
* ``arpo[:ALPHA,BETA[,K[,BRANCHES]]]`` — :class:`meta.rlvr.arpo.ARPO` (defaults 0.5, 1, 4, 2; the ``calc`` family
  only, it branches after tool results);
* ``ehpo[:THRESHOLD,LAMBDA[,BRANCHES]]`` — :class:`meta.rlvr.ehpo.EHPO` (defaults 1, 0.1, 2).

Importing this module declares the spec kind and registers the names (:func:`meta.controllers.register_spec`);
``meta.controllers`` never imports it. Numpy only, like the rest of ``import meta.rlvr``.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.controllers import build_spec, register_spec, register_spec_kind
from meta.rlvr.arpo import ARPO
from meta.rlvr.eepo import EEPO
from meta.rlvr.ehpo import EHPO
from meta.rlvr.hapo import HAPO

#: Spec kind of the RLVR token-level (in-group) controllers.
TOKEN_CONTROLLER_SPECS = "rlvr-token-controller"

register_spec_kind(
    TOKEN_CONTROLLER_SPECS,
    "RLVR token controller",
    "an",
    "token controller",
    "meta.rlvr.token_controllers.make_token_controller",
)


def _numbers(name: str, args: str, usage: str, defaults: Sequence[float]) -> list[float]:
    """The spec's comma-separated numbers, the missing trailing ones from ``defaults``."""
    parts = [p for p in args.split(",") if p] if args else []
    if len(parts) > len(defaults):
        raise ValueError(f"token-controller spec '{name}:{args}' takes {usage}, got {len(parts)} numbers")
    try:
        values = [float(p) for p in parts]
    except ValueError as exc:
        raise ValueError(f"token-controller spec '{name}:{args}': arguments must be numbers") from exc
    return values + list(defaults[len(values) :])


def _hapo(args: str) -> HAPO:
    tau, alpha, quantile = _numbers("hapo", args, "TAU,ALPHA[,QUANTILE]", (0.2, 1.0, 0.5))
    return HAPO(tau=tau, alpha=alpha, quantile=quantile)


def _eepo(args: str) -> EEPO:
    lr, threshold = _numbers("eepo", args, "LR[,ENTROPY_THRESHOLD]", (1e-3, float("inf")))
    return EEPO(lr=lr, entropy_threshold=threshold)


def _arpo(args: str) -> ARPO:
    alpha, beta, k, branches = _numbers("arpo", args, "ALPHA,BETA[,K[,BRANCHES]]", (0.5, 1.0, 4, 2))
    if k != int(k) or branches != int(branches):
        raise ValueError(f"token-controller spec 'arpo:{args}': K and BRANCHES must be whole numbers")
    return ARPO(alpha=alpha, beta=beta, k=int(k), branches=int(branches))


register_spec(TOKEN_CONTROLLER_SPECS, "hapo", _hapo)
register_spec(TOKEN_CONTROLLER_SPECS, "eepo", _eepo)


def _ehpo(args: str) -> EHPO:
    threshold, coef, branches = _numbers("ehpo", args, "THRESHOLD,LAMBDA[,BRANCHES]", (1.0, 0.1, 2))
    if branches != int(branches):
        raise ValueError(f"token-controller spec 'ehpo:{args}': BRANCHES must be a whole number")
    return EHPO(threshold=threshold, coef=coef, branches=int(branches))


register_spec(TOKEN_CONTROLLER_SPECS, "arpo", _arpo)
register_spec(TOKEN_CONTROLLER_SPECS, "ehpo", _ehpo)

#: Token controllers a spec can build.
TokenController = HAPO | EEPO | ARPO | EHPO


def make_token_controller(spec: str) -> TokenController:
    """Build a token-level controller from a spec: ``hapo:0.2,1``, ``eepo:0.001,1.5``, ``arpo:0.5,1``, ``ehpo:1,0.1``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(TOKEN_CONTROLLER_SPECS, spec)
    if not isinstance(controller, HAPO | EEPO | ARPO | EHPO):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a token controller")
    return controller
