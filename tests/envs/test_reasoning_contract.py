"""Contract of every registered task family (the reasoning counterpart of gymnasium's ``check_env``): seeded
determinism, difficulty labels in range, the reference completion verified correct and a wrong one refused, the
alphabet covering prompts and completions, tasks surviving a pickle round trip."""

from __future__ import annotations

import pickle

import pytest

from envs.reasoning.registry import FAMILY_SPECS, FamilySpec, family_spec


@pytest.fixture(params=sorted(FAMILY_SPECS))
def spec(request: pytest.FixtureRequest) -> FamilySpec:
    return family_spec(request.param)


def test_same_seed_same_tasks(spec: FamilySpec) -> None:
    assert spec.tasks(12, seed=5) == spec.tasks(12, seed=5)
    assert spec.tasks(12, seed=5) != spec.tasks(12, seed=6)


def test_difficulty_labels_and_family(spec: FamilySpec) -> None:
    for d in spec.difficulties[:4]:
        tasks = spec.tasks(6, seed=d, difficulties=[d])
        assert all(t.difficulty == d and t.family == spec.name for t in tasks)


def test_reference_verifies_and_wrong_answer_does_not(spec: FamilySpec) -> None:
    for t in spec.tasks(20, seed=0, difficulties=spec.difficulties[:3]):
        ref = spec.reference(t)
        assert spec.verify(t, ref + "$") == 1.0
        assert spec.verify(t, ref + "9$") == 0.0  # one more digit on the answer
        assert set(t.prompt) | set(ref) <= set(spec.alphabet)


def test_pickle_round_trip(spec: FamilySpec) -> None:
    tasks = spec.tasks(5, seed=1)
    assert pickle.loads(pickle.dumps(tasks)) == tasks


def test_unknown_family_and_difficulty_are_one_clear_sentence() -> None:
    with pytest.raises(ValueError, match="unknown task family 'sudoku'; known: add, mul"):
        family_spec("sudoku")
    with pytest.raises(ValueError, match=r"the 'countdown' family has difficulties \[2, 3, 4, 5\], got \[9\]"):
        family_spec("countdown").tasks(3, seed=0, difficulties=[9])
