"""In-context RL, AMAGO-style (Grigsby, Fan, Zhu, ICLR 2024): one sequence model over whole multi-episode rollouts.

The agent reads RL^2 inputs (observation, previous action, previous reward, reset flag) per timestep, runs a causal
Transformer (or a GRU / memory-free drop-in) over the rollout, and puts an actor and an ensemble of critics for several
discounts on the shared output. It learns off-policy from replayed trajectories with one loss (critic TD + actor term
+ filtered behaviour cloning) and one optimizer.

Modules: :mod:`.config` (typed configs), :mod:`.sequence` (trajectory encoders, KV cache), :mod:`.value_scale`
(symlog / two-hot), :mod:`.agent` (network and loss), :mod:`.replay` (trajectory replay), :mod:`.exploration`
(per-actor epsilon), :mod:`.tasks` (task -> env), :mod:`.trainer` (collect / update / evaluate / checkpoint),
:mod:`.baseline` (sb3-contrib RecurrentPPO), :mod:`.cli`, :mod:`.bench`.
"""

from __future__ import annotations
