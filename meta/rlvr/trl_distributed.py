"""Data-parallel stages for the TRL adapter: one global allocation, the same stages on every rank, rows balanced.

Under ``torchrun`` or ``accelerate launch`` TRL's ``GRPOTrainer`` runs one copy per process. Each rank's data loader
hands it its share of the global batch: TRL's ``RepeatSampler`` draws the same prompt order on every rank (same seed)
and accelerate's batch-sampler sharding gives rank ``r`` the ``r``-th contiguous slice. The staged protocol needs the
whole step in view (the allocator ranks prompts, DAPO refills until the *batch* is full, GRPO normalises per group),
so :class:`~meta.rlvr.trl.AllocatingGRPOTrainer` keeps the whole step on every rank and shares only the work:

1. **global batch**: :func:`global_rows` gathers every rank's rows in rank order, which is the sampler's order: the
   batch one process with ``P`` times the per-device batch would see;
2. **stages**: :func:`generate_and_score` splits each stage's global request (one row per response) into balanced
   contiguous slices (:func:`rank_share`), pads the short slices by one copied row so every rank calls TRL's
   generation and reward paths (:mod:`meta.rlvr.trl_internals`) with the same number of rows (their tensor gathers
   need equal shapes), and gathers the results back to every rank in global order, pad rows dropped. Because every
   rank sees the same rewards, the allocator asks for the same number of stages everywhere; a rank with no rows of
   its own still generates its pad row and so joins every collective. The pad row costs no wall-clock time: the rank
   with the longest slice sets the stage's duration;
3. **state**: statistics, allocator decisions, the reuse pool, the DAPO refill generator and the ledger are then
   computed from identical data on every rank and stay identical without further communication;
4. **training**: the kept rows are split again in balanced slices (:func:`rank_rows`); each rank trains on its own,
   a short one filled up with a copied row under an empty completion mask (TRL's loss metrics gather per-row tensors,
   which need equal shapes; the masked row adds nothing to the loss). DDP averages the gradients, and TRL's
   token-normalised losses (``dapo``, the default, and ``cispo``) divide by the global token count, so the update
   equals one process's on the same global batch. The per-sequence losses (``grpo``, ``bnpo``, ``dr_grpo``) average
   within each rank first, as in TRL, and match one process only when the kept rows divide evenly over the ranks;
5. **limits**: the row budget is global, the per-process budget times the number of processes, applied to the global
   allocation (every rank cuts the same responses); with ``steps_per_generation > 1`` (``dapo`` / ``cispo``) each
   rank's share, all ranks the same length, is padded with inert rows to a multiple of the slices, which keeps the
   shapes equal across ranks and the update equal to one process's.

With one process they reduce to the single-process path: no gathers, no padding, every row trained on the one rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelerate.utils import gather_object

from meta.rlvr.trl_internals import GRPOTrainer, calculate_rewards, generate_rows


def rank_share(n: int, rank: int, world: int) -> tuple[int, int]:
    """The ``[start, stop)`` slice of ``n`` items that ``rank`` of ``world`` takes: contiguous, sizes differ by <= 1.

    The first ``n % world`` ranks take one item more, so the slices of ranks ``0..world-1`` tile ``range(n)`` in order.

    Raises:
        ValueError: ``n < 0``, ``world < 1`` or ``rank`` outside ``[0, world)``.
    """
    if n < 0 or world < 1 or not 0 <= rank < world:
        raise ValueError(f"need n >= 0, world >= 1 and 0 <= rank < world, got n={n}, rank={rank}, world={world}")
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


def rank_rows(n: int, accelerator: Any) -> tuple[int, int, int]:
    """This process's :func:`rank_share` ``(start, stop)`` of ``n`` rows and the longest share (rows every rank holds
    once short shares are padded)."""
    world = accelerator.num_processes
    start, stop = rank_share(n, accelerator.process_index, world)
    return start, stop, -(-n // world)


def global_rows(trainer: GRPOTrainer, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every rank's training-batch rows, concatenated in rank order (the sampler's order); ``rows`` on one process."""
    if trainer.accelerator.num_processes == 1:
        return list(rows)
    return list(gather_object(list(rows)))


@dataclass
class StageRows:
    """One stage's generated and scored rows, in the order of the global request, identical on every rank.

    Attributes:
        prompt_ids: Prompt token ids per row.
        completion_ids: Completion token ids per row (EOS included if generated).
        completions: Decoded completions per row (text, or messages for conversational prompts).
        rewards: One list per row with every reward function's value (``nan`` for ``None``), TRL's order.
        padding: Rows generated only to keep ranks in step (summed over ranks), discarded.
        sampling_logps: The generation backend's log-probability of each sampled token per row (``None`` entries
            where vLLM could not score a token), or ``None`` when the backend gives none (transformers' generate).
    """

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    completions: list[Any]
    rewards: list[list[float]]
    padding: int
    sampling_logps: list[list[float | None]] | None = None


def generate_and_score(trainer: GRPOTrainer, prompts: list[Any], rows: list[dict[str, Any]]) -> StageRows:
    """Generate one response per entry of ``prompts`` (the global request) with TRL, spread over the ranks.

    Every rank must call this with the same ``prompts`` and ``rows`` (at least one). Rank ``r`` generates and scores
    its :func:`rank_share` of them, padded to the longest share, through TRL's own generation path
    (:func:`~meta.rlvr.trl_internals.generate_rows`, one sample per row, so a vLLM server receives the whole stage as
    one request) and reward dispatch (:func:`~meta.rlvr.trl_internals.calculate_rewards`, whose gather returns every
    rank's rewards); the token ids, completions and sampling log-probabilities are gathered with accelerate's
    ``gather_object``.

    Args:
        trainer: The trainer (an ``AllocatingGRPOTrainer``).
        prompts: The prompt of each requested response, global order.
        rows: The dataset row of each requested response (what reward functions read), global order.

    Raises:
        ValueError: An empty request, or ``prompts`` and ``rows`` of different lengths.
    """
    n = len(prompts)
    if n == 0 or len(rows) != n:
        raise ValueError(
            f"a stage needs at least one request and one row per prompt, got {n} prompts, {len(rows)} rows"
        )
    world = trainer.accelerator.num_processes
    shares = [rank_share(n, r, world) for r in range(world)]
    start, stop, width = rank_rows(n, trainer.accelerator)
    # A short share repeats a row of the request so every rank's tensors have the same first dimension.
    local = list(range(start, stop)) + [min(start, n - 1)] * (width - (stop - start))
    local_prompts = [prompts[i] for i in local]
    out = generate_rows(trainer, local_prompts)
    # calculate_rewards gathers every rank's rewards: world * width rows, rank after rank.
    gathered = calculate_rewards(
        trainer, [dict(rows[i]) for i in local], local_prompts, out.completions, out.completion_ids
    )
    rewards = [gathered[r * width + j] for r, (a, b) in enumerate(shares) for j in range(b - a)]
    # vLLM's per-token log-probabilities travel with their rows (TRL's importance-sampling correction needs them).
    mine = [
        (
            out.prompt_ids[j],
            out.completion_ids[j],
            out.completions[j],
            None if out.logprobs is None else list(out.logprobs[j]),
        )
        for j in range(stop - start)
    ]
    everyone = mine if world == 1 else gather_object(mine)
    return StageRows(
        prompt_ids=[p for p, _, _, _ in everyone],
        completion_ids=[c for _, c, _, _ in everyone],
        completions=[t for _, _, t, _ in everyone],
        rewards=rewards,
        padding=world * width - n,
        sampling_logps=None if out.logprobs is None else [list(lp or []) for _, _, _, lp in everyone],
    )
