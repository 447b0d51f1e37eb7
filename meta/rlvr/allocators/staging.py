"""The staged-rollout protocol every GRPO trainer in rolloutlab follows, and the ledger of what it cost.

One GRPO step asks an :class:`~meta.rlvr.allocators.Allocator` how many responses each prompt gets, possibly in
stages (AR3PO, DARS), and may inject an earlier correct response into an all-wrong group (AR3PO response reuse,
Zhang et al. 2025, §3.2). The compact trainer (:mod:`meta.rlvr.trainers.grpo`) and the TRL adapter
(:mod:`meta.rlvr.trl`) differ in how they sample and score, not in this protocol, so it lives here once:

* :func:`run_stages` — ``initial`` counts, then ``extra`` after each stage until the allocator asks for nothing more
  or ``max_stages`` stages ran;
* :func:`reuse_or_store` — after the stages, a group that got nothing right takes a stored correct response (with the
  reward the verifier gave it); any other group stores its correct responses for later;
* :class:`CostLedger` — exact cumulative cost: responses and tokens generated, prompt tokens read (once per stage a
  prompt is sampled in), what was dropped, reused and trained on.

Plain Python: no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from meta.rlvr.allocators.base import Allocator
from meta.rlvr.allocators.reuse import ResponseBuffer, StoredResponse
from meta.rlvr.allocators.stats import StatsTable


@dataclass
class CostLedger:
    """Cumulative rollout and training cost.

    Attributes:
        responses: Responses generated.
        completion_tokens: Tokens generated (EOS included).
        prompt_tokens: Prompt tokens read (each prompt once per stage it is sampled in).
        prompt_tokens_extra_stages: The part of ``prompt_tokens`` from stages after the first.
        dropped_responses: Generated responses in groups left out of the loss.
        dropped_tokens: Their completion tokens.
        reused_responses: Buffered responses injected (not generated).
        reused_tokens: Their tokens.
        groups: Generated groups.
        zero_variance_groups: Generated groups whose rewards were all equal.
        rows_trained: Responses (generated or reused) in the batches the loss was computed on.
        tokens_trained: Their completion tokens.
    """

    responses: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    prompt_tokens_extra_stages: int = 0
    dropped_responses: int = 0
    dropped_tokens: int = 0
    reused_responses: int = 0
    reused_tokens: int = 0
    groups: int = 0
    zero_variance_groups: int = 0
    rows_trained: int = 0
    tokens_trained: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain-data copy."""
        return asdict(self)

    def since(self, earlier: dict[str, int]) -> dict[str, int]:
        """Per-field increase over an earlier :meth:`as_dict` snapshot (one step's cost)."""
        now = self.as_dict()
        return {k: v - int(earlier.get(k, 0)) for k, v in now.items()}

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> CostLedger:
        """Inverse of :meth:`as_dict`; fields a snapshot predates start at 0."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown cost ledger fields {unknown}; known: {sorted(known)}")
        return cls(**{k: int(v) for k, v in data.items()})


def run_stages(
    allocator: Allocator,
    keys: Sequence[str],
    stats: StatsTable,
    generate: Callable[[list[int], int], None],
    rewards: Callable[[], list[list[float]]],
) -> int:
    """Run an allocator's stages for one batch of prompts.

    Args:
        allocator: Decides the counts (``initial`` for stage 0, ``extra`` after each stage).
        keys: Prompt keys in batch order.
        stats: Per-prompt statistics ``initial`` reads.
        generate: ``generate(counts, stage)`` samples ``counts[i]`` more responses for prompt ``i`` and scores them.
        rewards: The rewards collected so far this step, one list per prompt (what ``extra`` reads).

    Returns:
        The number of stages run.

    Raises:
        ValueError: The allocator returned the wrong number of counts or a negative count.
    """
    counts = _checked(allocator.initial(keys, stats), len(keys), allocator)
    stage = 0
    while any(c > 0 for c in counts) and stage < allocator.max_stages:
        generate(counts, stage)
        stage += 1
        counts = _checked(allocator.extra(keys, rewards(), stage), len(keys), allocator)
    return stage


def _checked(counts: Sequence[int], n: int, allocator: Allocator) -> list[int]:
    out = [int(c) for c in counts]
    if len(out) != n:
        raise ValueError(f"allocator {allocator.name!r} returned {len(out)} counts for {n} prompts")
    if any(c < 0 for c in out):
        raise ValueError(f"allocator {allocator.name!r} returned a negative count: {out}")
    return out


def reuse_or_store(
    buffer: ResponseBuffer, key: str, tokens: Sequence[Sequence[int]], rewards: Sequence[float]
) -> StoredResponse | None:
    """AR3PO response reuse for one group after its stages.

    A group with at least one response and none correct (every reward below the buffer's threshold) gets the most
    recent stored correct response for ``key`` (``None`` if there is none); any other group stores its correct
    responses and gets ``None``. An empty group neither takes nor stores.

    Args:
        buffer: The per-prompt buffer of correct responses.
        key: The prompt's key.
        tokens: The group's generated responses (token ids), not including reused ones.
        rewards: Their verifier rewards.
    """
    if not rewards:
        return None
    if max(rewards) < buffer.success_threshold:
        return buffer.get(key)
    buffer.add(key, tokens, rewards)
    return None
