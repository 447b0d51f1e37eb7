"""The lab: benchmark protocol (arm runners, sweeps, summaries, gates, matched references) and the scripts that run it.

Not installed with the wheel: scripts run from a clone as ``python experiments/<pillar>/<script>.py`` or
``python -m experiments.<pillar>.<script>``; ``rolloutlab bench`` imports each pillar's ``quick`` module from here.
"""
