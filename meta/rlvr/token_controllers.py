"""Specs of the RLVR controllers that act inside a group's sampling: HAPO (per token) and EEPO (between halves).

``rolloutlab rlvr train --token-controller SPEC`` and :class:`meta.rlvr.run.GRPORunConfig.token_controller` take

* ``hapo[:TAU,ALPHA[,QUANTILE]]`` — :class:`meta.rlvr.hapo.HAPO` (defaults 0.2, 1, 0.5);
* ``eepo[:LR[,ENTROPY_THRESHOLD]]`` — :class:`meta.rlvr.eepo.EEPO` (defaults 1e-3, always).

Importing this module declares the spec kind and registers both names (:func:`meta.controllers.register_spec`);
``meta.controllers`` never imports it. Numpy only, like the rest of ``import meta.rlvr``.
"""

from __future__ import annotations

from meta.controllers import build_spec, register_spec, register_spec_kind
from meta.rlvr.eepo import EEPO, eepo_from_spec_args
from meta.rlvr.hapo import HAPO, hapo_from_spec_args

#: Spec kind of the RLVR token-level (in-group) controllers.
TOKEN_CONTROLLER_SPECS = "rlvr-token-controller"

register_spec_kind(
    TOKEN_CONTROLLER_SPECS,
    "RLVR token controller",
    "an",
    "token controller",
    "meta.rlvr.token_controllers.make_token_controller",
)
register_spec(TOKEN_CONTROLLER_SPECS, "hapo", hapo_from_spec_args)
register_spec(TOKEN_CONTROLLER_SPECS, "eepo", eepo_from_spec_args)


def make_token_controller(spec: str) -> HAPO | EEPO:
    """Build a token-level controller from a spec such as ``hapo:0.2,1`` or ``eepo:0.001,1.5``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(TOKEN_CONTROLLER_SPECS, spec)
    if not isinstance(controller, HAPO | EEPO):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a token controller")
    return controller
