"""DARS-B's allocator: DARS depth plus the breadth settings the trainer must run with (Yang et al. 2025,
"Depth-Breadth Synergy in RLVR", section 5).

:class:`DARSBreadth` is DARS (:mod:`.dars`) with the breadth ``B`` (prompts per step) and ``E`` (full-batch epochs)
attached; :mod:`meta.rlvr.trainers.dars_breadth` applies them to a trainer config (``breadth_config``) and to a run
config whose allocator is a ``dars_b`` spec (``breadth_run_config``), and holds the trainer that does both,
``DARSBreadthTrainer``. The spec ``dars_b:N,N_max,EPOCHS,BREADTH`` (defaults 4, 16,
2, 64) builds the allocator (:mod:`.specs`). Numpy only.
"""

from __future__ import annotations

from meta.rlvr.allocators.dars import DARS

#: The spec name of :class:`DARSBreadth`.
DARS_B = "dars_b"


class DARSBreadth(DARS):
    """DARS with breadth: the allocator decides depth (extra responses for hard prompts), and carries the breadth the
    trainer must run with (``meta.rlvr.trainers.dars_breadth.breadth_config``).

    Args:
        base: ``N``, stage-1 responses per prompt.
        max_total: ``N_max``, the cap on a prompt's total responses.
        epochs: ``E``, full-batch optimizer steps per generated batch (>= 1).
        breadth: ``B``, prompts per step (>= 1).
        schedule: DARS's ``"et"`` (equal treatment) or ``"hw"`` (hardness weighted).
        std_normalized: Whether advantages are divided by the group std (GRPO) or not (Dr. GRPO).
    """

    name = DARS_B

    def __init__(
        self,
        base: int = 4,
        max_total: int = 16,
        epochs: int = 2,
        breadth: int = 64,
        schedule: str = "et",
        std_normalized: bool = True,
    ) -> None:
        super().__init__(base, max_total, schedule, std_normalized)
        if epochs < 1 or breadth < 1:
            raise ValueError(f"need epochs >= 1 and breadth >= 1, got epochs={epochs}, breadth={breadth}")
        self.epochs = int(epochs)
        self.breadth = int(breadth)
