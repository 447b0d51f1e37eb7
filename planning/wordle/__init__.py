"""Wordle as a POMDP: cached pattern table, base heuristics, rollout, exact evaluation, assistant and CLI.

Modules: ``table`` (feedback codes of every guess against every answer, cached on disk), ``model`` (beliefs as
candidate sets), ``heuristics`` (MIG, MRD, GEP, minimax), ``solver`` (greedy / rollout policies, exact evaluation),
``assistant`` (the interactive helper), ``bench`` and ``cli``. The game rules and the gymnasium env live in
:mod:`envs.wordle`; the word lists ship in ``data/`` (provenance in ``data/SOURCE.md``).

This file imports nothing on purpose: :mod:`envs.wordle` locates the word lists through this package.
"""
