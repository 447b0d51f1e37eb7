#!/usr/bin/env bash
# Every in-context benchmark part, one after another, then the summary. Each part skips what its JSON already holds
# and resumes a killed run from its checkpoint, so re-running this script continues where it stopped.
# Sized for the project's shared 2-core CPU (about 75 minutes in all); raise the minutes on a bigger machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
PY=${PY:-.venv/bin/python}
$PY experiments/incontext/benchmark.py --part references
$PY experiments/incontext/benchmark.py --part tmaze --minutes-per-run 2.5 --corridors 5,10,25,50,100
$PY experiments/incontext/benchmark.py --part bandit_2x100 --seeds 3 --minutes-per-run 3
$PY experiments/incontext/benchmark.py --part bandit_5x100 --seeds 3 --minutes-per-run 3
$PY experiments/incontext/benchmark.py --part keydoor --seeds 3 --minutes-per-run 3
# Give the T-maze corridors that were not solved in 2.5 minutes 6 more minutes each (resumed from their checkpoints).
$PY experiments/incontext/benchmark.py --part tmaze --corridors 5,10,25,50,100 --extend-minutes 6
$PY experiments/incontext/summarize.py
