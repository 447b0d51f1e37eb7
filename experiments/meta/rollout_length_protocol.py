"""The rollout-length meta-controller benchmark: test work split into resumable units, and the paired summary.

The experiment (``experiments/meta/rollout_length.py``) scores every arm on the perturbed test physics with the same
inner seeds. Test work is cut into :class:`EvalUnit` s (one arm, a slice of its runs), each a call of
:func:`meta.rollout_length.evaluate.run_arms`; a finished unit is filed with :func:`record_unit` into the arms file, so
a killed or ended session loses at most the unit in progress and run ``i`` keeps its inner seed whichever unit runs it.
:func:`summarize_arms` turns the per-run finals into the issue's statistics: mean, median and IQM with rliable's
stratified-bootstrap intervals, the paired difference of each META arm to the best schedule, and rliable's probability
that a META run beats a run of the best schedule (Agarwal et al., 2021).

:mod:`experiments.meta.quick` is the pillar's line in ``rolloutlab bench``; :mod:`experiments.meta.shared_arms`
lets several test processes fill one arms file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from meta.rollout_length.evaluate import merge_run_slices
from rolloutlab.statistics import (
    interval_estimates,
    iqm,
    mean_with_stderr,
    paired_difference,
    probability_of_improvement,
)

#: Arm-name prefix of the learned meta-policies (``meta_step``, ``meta_direct``): not schedules, never "the best".
META_PREFIX = "meta"
#: Arms that are neither schedules nor META: the sanity floor and the model-free baseline.
NON_SCHEDULES = ("random", "dqn_zoo")


@dataclass(frozen=True)
class EvalUnit:
    """One unit of test work: runs ``first_run .. first_run + runs - 1`` of one arm.

    Attributes:
        arm: The arm's name in the results (a controller spec, or a META name such as ``meta_step``).
        spec: The controller spec that runs it (``learned:PATH`` for a META arm).
        first_run: Index of the unit's first run (its inner seed is ``test_seed * 10_000 + first_run``).
        runs: Runs in the unit.
    """

    arm: str
    spec: str
    first_run: int
    runs: int

    @property
    def name(self) -> str:
        """A file-name-safe identity (its per-phase checkpoint is named after it)."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.arm)
        return f"{safe}_runs{self.first_run}-{self.first_run + self.runs - 1}"


def run_slices(test_runs: int, runs_per_unit: int) -> list[tuple[int, int]]:
    """``(first run, runs)`` of each slice of an arm's ``test_runs`` (one slice when ``runs_per_unit`` is 0)."""
    if test_runs < 1:
        raise ValueError(f"test_runs must be >= 1, got {test_runs}")
    step = runs_per_unit if 0 < runs_per_unit < test_runs else test_runs
    return [(start, min(step, test_runs - start)) for start in range(0, test_runs, step)]


def pending_units(
    arms: Mapping[str, str], test_runs: int, runs_per_unit: int, saved: Mapping[str, Any]
) -> list[EvalUnit]:
    """The units still to run: every slice of every arm that ``saved`` (the arms file) does not hold yet.

    Slice-major (runs 0-4 of every arm, then runs 5-9 of every arm, ...), arms in the given order within a slice: a
    long test that stops part-way leaves paired runs of every arm (an early look at, e.g., whether the gate's K > 0
    lead holds on the test physics) rather than all of one arm and none of the next. Units are independent (run i's
    seed depends on i alone), so the order changes no number.

    Args:
        arms: ``{arm name: controller spec}``.
        test_runs: Runs per arm.
        runs_per_unit: Runs per unit (0: one unit per arm).
        saved: The arms file's ``{"arms": {name: result}, "slices": {name: {first run: result}}}``.
    """
    done, slices = saved.get("arms", {}), saved.get("slices", {})
    units = []
    for arm, spec in arms.items():
        if arm in done:
            continue
        for start, runs in run_slices(test_runs, runs_per_unit):
            part = slices.get(arm, {}).get(str(start))
            if part is None or len(part.get("finals", [])) != runs:
                units.append(EvalUnit(arm, spec, start, runs))
    return sorted(units, key=lambda unit: unit.first_run)  # stable: arm order kept within a slice


def record_unit(unit: EvalUnit, result: Mapping[str, Any], saved: dict[str, Any], test_runs: int) -> bool:
    """File a finished unit into ``saved`` (the arms file, changed in place); True when its arm became complete.

    Slices are kept under ``saved["slices"][arm][first run]`` until they cover all ``test_runs`` runs, then merged in
    run order (:func:`~meta.rollout_length.evaluate.merge_run_slices`) into ``saved["arms"][arm]``.
    """
    slices = saved.setdefault("slices", {}).setdefault(unit.arm, {})
    slices[str(unit.first_run)] = dict(result)
    starts = sorted(int(s) for s in slices)
    covered = sum(len(slices[str(s)]["finals"]) for s in starts)
    contiguous = all(a + len(slices[str(a)]["finals"]) == b for a, b in itertools.pairwise(starts))
    if starts[0] != 0 or not contiguous or covered != test_runs:
        return False
    saved.setdefault("arms", {})[unit.arm] = merge_run_slices([slices[str(s)] for s in starts])
    del saved["slices"][unit.arm]
    if not saved["slices"]:
        del saved["slices"]
    return True


def machines_by_run(saved: Mapping[str, Any]) -> dict[str, dict[int, str | None]]:
    """``{arm: {run: machine}}``: where each run of the arms file was scored (None where its slice did not record it).

    Reads the machine (:func:`rolloutlab.device.cpu_arithmetic`) of finished arms (``{first run: machine}``, see
    :func:`~meta.rollout_length.evaluate.merge_run_slices`) and of loose slices alike.
    """
    out: dict[str, dict[int, str | None]] = {}
    for arm, result in saved.get("arms", {}).items():
        starts = sorted(int(s) for s in result.get("arithmetic", {})) or [0]
        ends = [*starts[1:], len(result["finals"])]
        out[arm] = {
            run: result.get("arithmetic", {}).get(str(start))
            for start, end in zip(starts, ends, strict=True)
            for run in range(start, end)
        }
    for arm, slices in saved.get("slices", {}).items():
        runs = out.setdefault(arm, {})
        for start, part in slices.items():
            runs.update({int(start) + i: part.get("arithmetic") for i in range(len(part["finals"]))})
    return out


def mixed_machine_runs(saved: Mapping[str, Any]) -> dict[int, list[str]]:
    """The runs whose arms were scored on more than one machine: ``{run: [machines]}`` (unrecorded ones left out).

    Run ``i`` of every arm shares its seeds, but the comparison is paired only where every arm's run ``i`` did its
    arithmetic on the same kind of CPU (:func:`rolloutlab.device.cpu_arithmetic`); a run listed here should be
    rescored for the arms that differ.
    """
    seen: dict[int, set[str]] = {}
    for runs in machines_by_run(saved).values():
        for run, machine in runs.items():
            if machine is not None:
                seen.setdefault(run, set()).add(machine)
    return {run: sorted(machines) for run, machines in sorted(seen.items()) if len(machines) > 1}


def is_schedule(arm: str) -> bool:
    """Whether ``arm`` is a hand-designed schedule (fixed, INC, DEC, INC-DEC, linear, uncertainty)."""
    return not arm.startswith(META_PREFIX) and not arm.startswith(NON_SCHEDULES)


def summarize_arms(
    arms: Mapping[str, Mapping[str, Any]], *, seed: int = 0, reps: int = 2000, level: float = 0.95
) -> dict[str, Any]:
    """The paired summary of one env's finished arms.

    Args:
        arms: ``{arm: {"finals": [per run], ...}}``; run ``i`` of every arm shares its inner seed.
        seed: Seeds rliable's bootstrap (numpy's global generator is restored afterwards).
        reps: Bootstrap resamples per interval.
        level: Interval coverage.

    Returns:
        ``{"arms": {arm: {"mean", "median", "iqm", "se", "ci": {"mean", "median", "iqm"}, "runs"}},
        "best_schedule", "prob_improvement_vs_best": {meta arm: {"value", "ci"}},
        "paired_minus_best": {meta arm: {"mean", "se", "ci"}}}``. The best schedule is the one with the highest IQM.
        Paired differences and probabilities need the same number of runs in both arms; META arms without that
        are left out of them.
    """
    finals = {arm: np.asarray(r["finals"], dtype=np.float64) for arm, r in arms.items() if len(r.get("finals", []))}
    aggregates: dict[str, Callable[[np.ndarray], float]] = {
        "mean": lambda x: float(np.mean(x)),
        "median": lambda x: float(np.median(x)),
        "iqm": lambda x: float(iqm(x)),
    }
    estimates = interval_estimates(finals, aggregates, seed=seed, reps=reps, level=level)
    out: dict[str, Any] = {"arms": {}}
    for arm, values in finals.items():
        est = estimates[arm]
        out["arms"][arm] = {
            "mean": est["mean"].value,
            "median": est["median"].value,
            "iqm": est["iqm"].value,
            "se": mean_with_stderr(values).stderr,
            "ci": {name: [e.low, e.high] for name, e in est.items()},
            "runs": int(values.size),
        }
    schedules = [arm for arm in finals if is_schedule(arm)]
    if not schedules:
        return out
    best = max(schedules, key=lambda arm: out["arms"][arm]["iqm"])
    out["best_schedule"] = best
    out["prob_improvement_vs_best"] = {}
    out["paired_minus_best"] = {}
    for offset, arm in enumerate(a for a in finals if a.startswith(META_PREFIX)):
        if finals[arm].size != finals[best].size:
            continue
        poi = probability_of_improvement(finals[arm], finals[best], seed=seed + 1 + offset, reps=reps, level=level)
        out["prob_improvement_vs_best"][arm] = {"value": poi.value, "ci": [poi.low, poi.high]}
        diff = paired_difference(finals[arm], finals[best], rng=seed + 1 + offset, n_resamples=reps, level=level)
        se = mean_with_stderr(finals[arm] - finals[best]).stderr
        out["paired_minus_best"][arm] = {"mean": diff.value, "se": se, "ci": [diff.low, diff.high]}
    return out


def target_met(summary: Mapping[str, Any], meta_arm: str) -> bool:
    """The issue's target for ``meta_arm``: its IQM above every schedule's, and a probability of improvement over
    the best schedule above 0.5 whose interval excludes 0.5."""
    arms = summary.get("arms", {})
    if meta_arm not in arms or meta_arm not in summary.get("prob_improvement_vs_best", {}):
        return False
    meta_iqm = arms[meta_arm]["iqm"]
    above_all = all(meta_iqm > r["iqm"] for arm, r in arms.items() if is_schedule(arm))
    poi = summary["prob_improvement_vs_best"][meta_arm]
    return bool(above_all and poi["value"] > 0.5 and poi["ci"][0] > 0.5)


def schedule_table(summary: Mapping[str, Any], order: Sequence[str]) -> str:
    """A markdown table of the summary (mean, median, IQM with intervals) in ``order``, then the META comparisons."""
    lines = ["| arm | runs | mean [95% CI] | median [95% CI] | IQM [95% CI] |", "|---|---|---|---|---|"]
    arms = summary.get("arms", {})
    for arm in order:
        if arm not in arms:
            continue
        r = arms[arm]

        def cell(name: str, r: Mapping[str, Any] = r) -> str:
            low, high = r["ci"][name]
            return f"{r[name]:.1f} [{low:.1f}, {high:.1f}]"

        lines.append(f"| {arm} | {r['runs']} | {cell('mean')} | {cell('median')} | {cell('iqm')} |")
    best = summary.get("best_schedule")
    for arm, poi in summary.get("prob_improvement_vs_best", {}).items():
        diff = summary["paired_minus_best"][arm]
        lines.append(
            f"\n{arm} vs the best schedule ({best}): P(improvement) {poi['value']:.2f} "
            f"[{poi['ci'][0]:.2f}, {poi['ci'][1]:.2f}]; paired mean difference {diff['mean']:+.1f} "
            f"(s.e. {diff['se']:.1f}); target met: {'yes' if target_met(summary, arm) else 'no'}"
        )
    return "\n".join(lines) + "\n"
