"""Procedurally generated tasks with exact verifiers, for RL with verifiable rewards (the rlvr pillar).

Two families, each with a difficulty knob (the number of digits, 1-6):

* ``add``: reversed-digit addition. Operands and answer are written least-significant digit first, so a left-to-right
  decoder can carry as it goes (the format used in the length-generalisation literature, e.g. Lee et al. 2023,
  "Teaching Arithmetic to Small Transformers").
* ``mul``: reversed-digit multiplication of a d-digit number by a single digit, also least-significant digit first.

A third family, ``calc`` (:mod:`envs.reasoning.tooluse`), is tool use: multi-step ``+ - *`` expressions that the model
may solve with calculator calls ``<calc>EXPR</calc>`` (the environment inserts the result) and a scratchpad.

Everything here is plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from envs.reasoning.tasks import (
    FAMILIES,
    MAX_DIGITS,
    Task,
    make_prompt_set,
    make_task,
    verify,
)

__all__ = ["FAMILIES", "MAX_DIGITS", "Task", "make_prompt_set", "make_task", "verify"]
