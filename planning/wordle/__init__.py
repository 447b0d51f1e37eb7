"""Wordle as a POMDP: cached pattern table, base heuristics, rollout, exact evaluation, assistant and CLI.

Modules: ``table`` (feedback codes of every guess against every answer, cached on disk), ``model`` (beliefs as
candidate sets), ``heuristics`` (MIG, MRD, GEP, minimax), ``exact`` (optimal play on small beliefs), ``solver``
(greedy / rollout policies, exact evaluation), ``book`` (the cached second-move replies), ``cache`` (listing and
clearing the cached files), ``assistant`` (the interactive helper), ``bench`` and ``cli``. The game
rules and the word lists are the ground floor, :mod:`envs.wordle_rules` (lists in ``envs/wordle_data/``); the
gymnasium env is :mod:`envs.wordle`.
"""
