"""Procedurally generated tasks with exact verifiers, for RL with verifiable rewards (the rlvr pillar).

Two families, each with a difficulty knob (the number of digits, 1-6):

* ``add``: reversed-digit addition. Operands and answer are written least-significant digit first, so a left-to-right
  decoder can carry as it goes (the format used in the length-generalisation literature, e.g. Lee et al. 2023,
  "Teaching Arithmetic to Small Transformers").
* ``mul``: reversed-digit multiplication of a d-digit number by a single digit, also least-significant digit first.

A third family, ``calc`` (:mod:`envs.reasoning.tooluse`), is tool use: multi-step ``+ - *`` expressions that the model
may solve with calculator calls ``<calc>EXPR</calc>`` (the environment inserts the result) and a scratchpad;
:func:`envs.reasoning.tooluse.needs_tool` labels the prompts that need the calculator and those that do not.

Three more families give each kind of RLVR method room to act: ``scratch`` (:mod:`envs.reasoning.scratchpad`, addition
with an optional carry scratchpad and token budgets in the prompt), ``countdown`` (:mod:`envs.reasoning.countdown`,
reach a target from given numbers; any valid derivation scores, most tasks have many) and ``carry``
(:mod:`envs.reasoning.carry`, multi-operand sums answered directly or step by step). :mod:`envs.reasoning.registry`
holds one entry per family (prompt sets, verifier, reference completion, alphabet, difficulty range).

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
