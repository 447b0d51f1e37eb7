"""A compact GRPO trainer for small causal LMs, with per-prompt allocators and exact cost accounting.

One step (Shao et al. 2024, GRPO; Yu et al. 2025, DAPO):

1. draw ``prompts_per_step`` prompts; the allocator (:mod:`meta.rlvr.allocators`) sets each prompt's first-stage
   count, then, stage by stage, how many more responses each prompt gets given this step's rewards so far;
2. sample with a KV cache (:mod:`meta.rlvr.trainers.sampling`) and score every response with the verifier;
3. optionally inject buffered correct responses into all-wrong groups (AR3PO response reuse, each with the reward the
   verifier gave it when it was stored) and drop zero-variance groups, refilling with fresh prompts (DAPO dynamic
   sampling);
4. advantages per group of *any* size ``n``: ``grpo``: ``A = (r − mean) / (std + ε)`` (population std),
   ``dr_grpo``: ``A = r − mean`` (Liu et al. 2025, Dr. GRPO, eq. 4);
5. the behaviour log-probabilities ``log π_old`` of the batch are computed once, then the batch is split into
   ``minibatches`` contiguous minibatches and each gets one optimizer step, for ``epochs`` passes (TRL's
   ``steps_per_generation`` and ``num_iterations``; DAPO's mini-batches). From the second optimizer step on the policy
   differs from the sampling policy, so the ratio ``ρ = π/π_old`` moves away from 1 and the clipped surrogate
   ``−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)`` with clip-higher ``ε_high > ε_low`` (DAPO §3.1), or BAPO's adaptive
   bounds, act on it; plus an optional ``β·KL`` to a frozen reference (k3 estimator, Schulman 2020);
6. the per-token loss is aggregated by one of three normalisers (:func:`loss_normaliser`): per sequence, then over
   sequences (``loss="sequence"``, GRPO eq. 3); over all tokens of the batch (``loss="dapo"``, DAPO eq. 12); or by the
   constant ``max_new_tokens × responses`` (``loss="dr_grpo"``, Dr. GRPO, the default with ``advantage="dr_grpo"``).

The stages and response reuse follow the protocol of :mod:`meta.rlvr.allocators.staging`, shared with the TRL adapter.
Cost accounting (:class:`~meta.rlvr.allocators.staging.CostLedger`) is exact: responses and completion tokens generated
(EOS included), prompt tokens read (each prompt once per stage in which it is sampled, as a prefix-caching server would;
the part due to stages after the first kept apart), responses and tokens in dropped groups, reused responses counted
separately (they cost no generation), and the rows and tokens the loss was computed on.

The trainer's whole state (model, optimizer, reference model, random generators, prompt order, statistics, response
buffer, controllers, costs) is plain data in :meth:`GRPOTrainer.state_dict`, so a run can be checkpointed and resumed
bit-identically (:mod:`meta.rlvr.trainers.run`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from envs.reasoning import Task, verify
from envs.reasoning.tooluse import CALL_CLOSE
from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.allocators.reuse import ResponseBuffer
from meta.rlvr.allocators.staging import CostLedger, reuse_or_store, run_stages
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.guidance import Guidance
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.arpo import BranchingRollout, prefix_advantages
from meta.rlvr.token.clipping import BalancedClip
from meta.rlvr.token.eepo import EEPO, perturbed
from meta.rlvr.token.ehpo import response_mode
from meta.rlvr.token.hapo import HAPO, token_group_advantages
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.token.temperature import EntropyTemperature
from meta.rlvr.trainers.sampling import Samples, ToolHook, sample, sequence_logprobs
from rolloutlab.device import resolve_device
from rolloutlab.run_state import capture_rng, restore_rng

LossKind = Literal["sequence", "dapo", "dr_grpo"]
LOSS_KINDS: tuple[str, ...] = ("sequence", "dapo", "dr_grpo")


@dataclass
class GRPOConfig:
    """Trainer settings.

    The update defaults, ``minibatches=4`` and ``epochs=1``, make four optimizer steps per generated batch, each on a
    quarter of it (with the default 16 prompts, four groups per minibatch), and use every sample once. That is the
    regime real GRPO/DAPO trainers run in: DAPO splits each 512-prompt rollout batch into 16 mini-batches of 32
    prompts, and TRL exposes it as ``steps_per_generation``, both with one pass (``num_iterations=1``). Why not one
    step per batch (the earlier default): the ratio is then exactly 1, so clip-higher and BAPO's bounds never act and
    the "clipped surrogate" is a plain policy gradient. Why not more passes: every extra pass re-fits the same batch
    and makes later steps more off-policy; one pass keeps the staleness at most ``minibatches − 1`` optimizer steps,
    which the clip range is meant for. Each minibatch's loss uses the batch normaliser divided by the number of
    minibatches, so with one minibatch and one pass this is exactly the single full-batch step (bit for bit the
    trainer's update before minibatches existed).

    The learning rate goes with the schedule: AdamW moves the weights by about ``lr`` per optimizer step whatever the
    gradient's scale, so four steps per batch move the policy about four times as far per generated batch as one.
    The default ``lr=1e-4`` is sized for four steps; at 3e-4 (the rate tuned for one step per batch, which the
    benchmark keeps with ``minibatches=1``) the character model overshoots and its held-out accuracy falls back
    within the slow "it learns" test's 75 steps. Scale ``lr`` with ``1/minibatches`` when changing the schedule.

    Attributes:
        prompts_per_step: Prompts (groups) per step.
        max_new_tokens: Most tokens per response (EOS included); also Dr. GRPO's constant normaliser per response.
        temperature: Sampling temperature (a temperature controller may change it).
        lr: AdamW learning rate per optimizer step (see above for the default).
        advantage: ``"grpo"`` (std-normalised) or ``"dr_grpo"`` (mean-centred only).
        loss: ``"sequence"`` (per-sequence mean, GRPO), ``"dapo"`` (token-level, DAPO) or ``"dr_grpo"`` (token sum over
            the constant ``max_new_tokens × responses``); ``None`` picks ``"dr_grpo"`` for ``advantage="dr_grpo"``
            (Dr. GRPO removes both the std and the length normalisation) and ``"dapo"`` otherwise.
        clip_low: ``ε_low``, in ``[0, 1]``.
        clip_high: ``ε_high`` (clip-higher when larger than ``ε_low``), ``>= 0``.
        kl_coef: ``β`` of the KL penalty to the initial policy (0 disables it and the reference copy).
        minibatches: Optimizer steps per pass over a generated batch; the batch's learning rows are split into this
            many contiguous minibatches (fewer if it has fewer rows). See above for the default.
        epochs: Passes over each generated batch (TRL's ``num_iterations``, PPO's epochs).
        max_grad_norm: Gradient clipping.
        reuse_capacity: Correct responses kept per prompt when the allocator asks for reuse.
        seed: Seed for prompt order and sampling.
        device: Where the policy (and the KL reference) runs and trains: ``cpu`` (the default, the tested path of
            every committed result), ``cuda``, ``cuda:N`` or ``auto`` (:func:`rolloutlab.device.resolve_device`).
            The trainer moves the model there. Tokens are still drawn from the trainer's CPU generator, so the
            sampling stream, and the checkpointed generator state, do not depend on the device.
    """

    prompts_per_step: int = 16
    max_new_tokens: int = 8
    temperature: float = 1.0
    lr: float = 1e-4
    advantage: Literal["grpo", "dr_grpo"] = "grpo"
    loss: LossKind | None = None
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    minibatches: int = 4
    epochs: int = 1
    max_grad_norm: float = 1.0
    reuse_capacity: int = 4
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.advantage not in ("grpo", "dr_grpo"):
            raise ValueError(f"advantage must be 'grpo' or 'dr_grpo', got {self.advantage!r}")
        if self.loss is not None and self.loss not in LOSS_KINDS:
            raise ValueError(f"loss must be one of {list(LOSS_KINDS)} or None, got {self.loss!r}")
        for name in ("prompts_per_step", "max_new_tokens", "minibatches", "epochs", "reuse_capacity"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.clip_low <= 1.0 or self.clip_high < 0.0:
            raise ValueError(f"need 0 <= clip_low <= 1 and clip_high >= 0, got {self.clip_low}, {self.clip_high}")
        if self.lr <= 0 or self.kl_coef < 0 or self.max_grad_norm <= 0 or self.temperature < 0:
            raise ValueError("need lr > 0, kl_coef >= 0, max_grad_norm > 0 and temperature >= 0")

    @property
    def loss_kind(self) -> str:
        """The loss normaliser in effect (``loss``, or the advantage's own when ``loss`` is ``None``)."""
        if self.loss is not None:
            return self.loss
        return "dr_grpo" if self.advantage == "dr_grpo" else "dapo"


@dataclass
class Response:
    """One response: completion token ids, verifier reward, whether it was reused from the buffer, and which tokens
    a tool inserted (0/1 per token, ``None`` without a tool; inserted tokens are left out of the loss)."""

    tokens: list[int]
    reward: float
    reused: bool = False
    inserted: list[int] | None = None
    temperatures: list[float] | None = None  # per token, when a token controller (HAPO) set them
    entropies: list[float] | None = None  # per token at the base temperature, idem (and with ARPO)
    family: int | None = None  # ARPO: id of the initial response this one shares a prefix with (its own if none)
    shared: int = 0  # ARPO: leading tokens copied from that response, not generated again
    context: list[int] | None = None  # guidance: the prompt ids it is trained under (a hint or budget); None: group's
    forced: int = 0  # guidance (Guide): leading tokens the sampler was given, not drawn (behaviour probability 1)
    condition: int | None = None  # guidance: what it was sampled under (hint characters, token budget)

    @property
    def policy_tokens(self) -> int:
        """Tokens the model sampled (the length without the tool's insertions)."""
        return len(self.tokens) - (sum(self.inserted) if self.inserted else 0)


@dataclass
class Group:
    """A prompt and its responses this step."""

    task: Task
    prompt_ids: list[int]
    responses: list[Response] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.responses]


def response_measures(texts: Sequence[str], policy_tokens: Sequence[int]) -> dict[str, float]:
    """Per-answer means of a batch of decoded completions: the issue-21 measures of the step log and evaluations.

    Args:
        texts: Decoded completions (tool results included, as the sampler left them).
        policy_tokens: Tokens the model sampled in each (tool insertions left out, EOS counted).

    Returns:
        ``{"tool_calls": calculator calls (``</calc>``) per answer, "answer_length": sampled tokens per answer,
        "slow_share": share of slow-mode answers (:func:`meta.rlvr.token.ehpo.response_mode`)}``; zeros for no answers.
    """
    if len(texts) != len(policy_tokens):
        raise ValueError(f"need one length per text, got {len(texts)} and {len(policy_tokens)}")
    if not texts:
        return {"tool_calls": 0.0, "answer_length": 0.0, "slow_share": 0.0}
    return {
        "tool_calls": float(np.mean([t.count(CALL_CLOSE) for t in texts])),
        "answer_length": float(np.mean(policy_tokens)),
        "slow_share": float(np.mean([response_mode(t) == "slow" for t in texts])),
    }


def group_advantages(rewards: Sequence[float], kind: str, eps: float = 1e-6) -> list[float]:
    """Advantages of one group of any size.

    ``grpo``: ``(r − mean)/(std + eps)`` with the population std; ``dr_grpo``: ``r − mean``. A group of one response
    (or with all-equal rewards) gets zeros.
    """
    if kind not in ("grpo", "dr_grpo"):
        raise ValueError(f"advantage must be 'grpo' or 'dr_grpo', got {kind!r}")
    r = np.asarray(rewards, dtype=float)
    if r.size < 2:
        return [0.0] * int(r.size)
    centred = r - r.mean()
    if kind == "grpo":
        centred = centred / (r.std() + eps)
    return [float(x) for x in centred]


def loss_normaliser(kind: str, lengths: Sequence[int], max_new_tokens: int) -> float:
    """The denominator of a batch's policy loss, given every response's completion length (tokens, EOS included).

    * ``"sequence"`` (GRPO, Shao et al. 2024, eq. 3): each response's token sum is first divided by its own length
      (done in :func:`aggregate_loss`); the batch then divides by the number of responses ``N``.
    * ``"dapo"`` (DAPO, Yu et al. 2025, eq. 12): the batch's token sum over the number of tokens ``Σ|o_i|``.
    * ``"dr_grpo"`` (Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-Like Training", §3.2 and its eq. for the
      Dr. GRPO objective): the token sum over a constant, ``max_new_tokens × N`` — the largest completion length times
      the number of responses, as in the authors' code (``MAX_TOKENS``) and TRL's ``loss_type="dr_grpo"``. Neither
      ``1/|o_i|`` nor the batch's token count enters, so a long wrong answer is not penalised less per token than a
      short one (the length bias the paper removes).

    Responses with zero advantage count here even though they add nothing to the gradient: they are part of the batch.
    """
    if kind == "sequence":
        return float(len(lengths))
    if kind == "dapo":
        return float(sum(lengths))
    if kind == "dr_grpo":
        return float(max_new_tokens * len(lengths))
    raise ValueError(f"loss must be one of {list(LOSS_KINDS)}, got {kind!r}")


def aggregate_loss(per_token: torch.Tensor, mask: torch.Tensor, kind: str, normaliser: float) -> torch.Tensor:
    """Reduce a ``(rows, width)`` per-token loss with its 0/1 ``mask`` to a scalar (see :func:`loss_normaliser`)."""
    if kind == "sequence":
        per_sequence = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_sequence.sum() / normaliser
    if kind in ("dapo", "dr_grpo"):
        return (per_token * mask).sum() / normaliser
    raise ValueError(f"loss must be one of {list(LOSS_KINDS)}, got {kind!r}")


@dataclass
class _Minibatch:
    """Rows of one optimizer step with their fixed behaviour / reference log-probabilities."""

    prompts: list[list[int]]
    completions: list[list[int]]
    advantages: torch.Tensor  # (rows, 1), or (rows, width) per token (ARPO's shared prefixes)
    old_logp: torch.Tensor | None  # None: on-policy (one step per batch), the ratio is exactly 1
    ref_logp: torch.Tensor | None
    policy_mask: torch.Tensor | None = None  # (rows, width), 0 on tool-inserted tokens; None: no tool insertions
    temperatures: torch.Tensor | None = None  # (rows, width) per-token sampling temperatures (HAPO), 1 past the end
    eps_low: torch.Tensor | None = None  # (rows, width) per-token clip bounds (HAPO)
    eps_high: torch.Tensor | None = None


RewardFn = Callable[[Task, str], float]
#: A learning row: prompt ids, completion ids, advantage (one, or per token), 0/1 flags of tokens out of the loss.
_Row = tuple[list[int], list[int], float | list[float], list[int] | None]
#: Part of a stage's sampling: group index per row, the samples, and ARPO's (family, shared tokens) per row.
_Part = tuple[list[int], Samples, list[tuple[int, int]] | None]


class GRPOTrainer:
    """GRPO with a pluggable per-prompt allocator.

    Args:
        model: Causal LM (Hugging Face ``PreTrainedModel`` or a module with the same forward); moved to
            ``config.device`` here.
        vocab: Encodes prompts, decodes completions.
        tasks: Training prompt pool, visited in shuffled epochs.
        allocator: Decides responses per prompt (and stages, dropping, reuse).
        config: :class:`GRPOConfig`.
        reward_fn: ``(task, completion_text) -> reward``; exact-match :func:`envs.reasoning.verify` by default. Any
            scale works; reused responses keep the reward it gave them.
        temperature_controller: Optional E3 temperature controller, updated from each step's token entropy.
        length_penalty: Optional ALP shaping of the rewards used for advantages (statistics keep raw rewards).
        clip_controller: Optional BAPO controller setting the ratio bounds from each optimizer step's ratios.
        tool: Optional tool hook run while sampling and evaluating (:class:`meta.rlvr.trainers.tools.CalculatorTool` for
        the
            ``calc`` tasks); the tokens it inserts are kept out of the policy-gradient and KL terms and out of the
            loss normaliser's token counts. Not combined with response reuse (a reused response's insertions are
            not stored).
        token_controller: Optional HAPO controller (:mod:`meta.rlvr.token.hapo`): per-token sampling temperatures and
        clip
            bounds from each token's normalised log-entropy, token-level group-average advantages; its entropy
            statistics are updated after every step from that step's tokens. Not combined with ``clip_controller``
            (both set the clip bounds), ``temperature_controller`` or response reuse (a reused response's
            per-token temperatures are not stored).
        eepo: Optional EEPO two-stage rollout (:mod:`meta.rlvr.token.eepo`): each stage samples half of every group,
            takes the gated unlearning step on it, samples the other half from the perturbed weights and restores
            them exactly before the update. Not combined with ``token_controller``.
        branching: Optional branching rollout (:class:`meta.rlvr.token.arpo.BranchingRollout`: ARPO, or EHPO of
            :mod:`meta.rlvr.token.ehpo`): half of each group's budget sampled whole, the rest branched from their
            prefixes where the controller says (ARPO: after tool results whose next tokens are more uncertain than
            the first ones; EHPO: at high-entropy reasoning units) or sampled whole when no branch takes it, shared
            prefixes trained once with the mean advantage of their branches; the controller may shape the rewards
            (EHPO's difficulty-aware length penalty). Not combined with ``token_controller``, ``eepo`` or
            ``length_penalty``.
        guidance: Optional guidance controller (:mod:`meta.rlvr.guidance`: Guide, SEELE, HBPO): it runs the step's
            rollout through :meth:`generate_for` and :meth:`add_response` (hinted or budgeted contexts, each
            response trained under its own context; Guide's hint tokens with behaviour probability 1) and may set
            the group advantages. Not combined with a tool, response reuse, ``token_controller``, ``eepo`` or
            ``branching``. Without it (the default) nothing here changes.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab: CharVocab,
        tasks: Sequence[Task],
        allocator: Allocator,
        config: GRPOConfig | None = None,
        *,
        reward_fn: RewardFn = verify,
        temperature_controller: EntropyTemperature | None = None,
        length_penalty: AdaptiveLengthPenalty | None = None,
        clip_controller: BalancedClip | None = None,
        tool: ToolHook | None = None,
        token_controller: HAPO | None = None,
        eepo: EEPO | None = None,
        branching: BranchingRollout | None = None,
        guidance: Guidance | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("the task pool is empty")
        if tool is not None and getattr(allocator, "reuse", False):
            raise ValueError("a tool hook cannot be combined with response reuse (insertions are not buffered)")
        if token_controller is not None and (
            clip_controller is not None or temperature_controller is not None or getattr(allocator, "reuse", False)
        ):
            raise ValueError("HAPO sets temperatures and clip bounds itself: no clip/temperature controller, no reuse")
        self.tool = tool
        self.token_controller = token_controller
        if eepo is not None and token_controller is not None:
            raise ValueError("EEPO's unlearning step uses one temperature: not combined with a token controller")
        self.eepo = eepo
        if branching is not None and (token_controller is not None or eepo is not None or length_penalty is not None):
            raise ValueError("a branching rollout (ARPO/EHPO) is not combined with HAPO, EEPO or a length penalty")
        if branching is not None and tool is None and branching.needs_tool:
            raise ValueError(f"{type(branching).__name__} branches after tool results: needs a tool (the calc family)")
        self.branching = branching
        if guidance is not None and (
            tool is not None
            or token_controller is not None
            or eepo is not None
            or branching is not None
            or getattr(allocator, "reuse", False)
        ):
            raise ValueError(
                "a guidance controller is not combined with a tool, reuse, HAPO, EEPO or a branching rollout"
            )
        self.guidance = guidance
        self._entropy_sink: list[float] = []
        self.cfg = config or GRPOConfig()
        self.loss_kind = self.cfg.loss_kind
        self.device = resolve_device(self.cfg.device)
        self.model = model.to(self.device)
        self.vocab = vocab
        self.tasks = list(tasks)
        self.allocator = allocator
        self.reward_fn = reward_fn
        self.temperature_controller = temperature_controller
        self.length_penalty = length_penalty
        self.clip_controller = clip_controller
        self.temperature = temperature_controller.temperature if temperature_controller else self.cfg.temperature
        self.stats = StatsTable()
        self.buffer = (
            ResponseBuffer(self.cfg.reuse_capacity, getattr(allocator, "success_threshold", 0.5))
            if getattr(allocator, "reuse", False)
            else None
        )
        self.costs = CostLedger()
        self.rng = np.random.default_rng(self.cfg.seed)
        self.generator = torch.Generator().manual_seed(self.cfg.seed)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=self.cfg.lr, weight_decay=0.0)
        self.ref_model = copy.deepcopy(model).eval() if self.cfg.kl_coef > 0 else None
        self.suppress = (vocab.pad_id, vocab.bos_id)
        self.num_steps = 0
        self.last_solve_rates: list[float] = []
        self._order = self.rng.permutation(len(self.tasks))
        self._cursor = 0

    # --- prompts -------------------------------------------------------------------------------------------------
    def _draw(self, n: int) -> list[Task]:
        out: list[Task] = []
        while len(out) < n:
            if self._cursor == len(self._order):
                self._order = self.rng.permutation(len(self.tasks))
                self._cursor = 0
                self.allocator.end_epoch()
            take = min(n - len(out), len(self._order) - self._cursor)
            out += [self.tasks[int(i)] for i in self._order[self._cursor : self._cursor + take]]
            self._cursor += take
        return out

    # --- rollout -------------------------------------------------------------------------------------------------
    def _generate(
        self,
        groups: Sequence[Group],
        rows: Sequence[int],
        prefixes: Sequence[Sequence[int]] | None = None,
        max_new_tokens: int | None = None,
    ) -> Samples:
        """One response for each row (a group index per row), continuing ``prefixes`` (ARPO's branches) if given."""
        prompts = [groups[i].prompt_ids for i in rows]
        if prefixes is not None:
            prompts = [p + list(q) for p, q in zip(prompts, prefixes, strict=True)]
        return sample(
            self.model,
            prompts,
            max_new_tokens=max_new_tokens or self.cfg.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=self.generator,
            suppress=self.suppress,
            tool=self.tool,
            token_temperature=self._token_temperature if self.token_controller is not None else None,
            record_entropies=self.branching is not None,
        )

    def _generate_eepo(self, groups: Sequence[Group], counts: Sequence[int]) -> list[tuple[list[int], Samples]]:
        """EEPO's two-stage rollout: ⌈n/2⌉ per group, the gated unlearning step, ⌊n/2⌋ more, weights restored."""
        assert self.eepo is not None
        first = [i for i, c in enumerate(counts) for _ in range((int(c) + 1) // 2)]
        second = [i for i, c in enumerate(counts) for _ in range(int(c) // 2)]
        out = self._generate(groups, first)
        parts = [(first, out)]
        if second:
            if self.eepo.decide({"entropy": out.mean_entropy}):
                prompts = [groups[i].prompt_ids for i in first]
                with perturbed(
                    self.model,
                    prompts,
                    out.completions,
                    lr=self.eepo.lr,
                    pad_id=self.vocab.pad_id,
                    temperature=self.temperature,
                    suppress=self.suppress,
                ):
                    parts.append((second, self._generate(groups, second)))
            else:
                parts.append((second, self._generate(groups, second)))
        return parts

    def _generate_branching(self, groups: Sequence[Group], counts: Sequence[int]) -> list[_Part]:
        """The branching rollout (:mod:`meta.rlvr.token.arpo`): ``⌈n/2⌉`` whole responses per group, branches at the
        controller's points, drawn with its probabilities, whole responses for the budget left; ``n`` in all."""
        arpo = self.branching
        assert arpo is not None
        family = self.costs.responses  # unique ids: responses generated before this stage
        first = [i for i, c in enumerate(counts) for _ in range(arpo.initial_count(c))]
        out = self._generate(groups, first)
        parts: list[_Part] = [(first, out, [(family + k, 0) for k in range(len(first))])]
        left = [int(c) - arpo.initial_count(c) for c in counts]
        rows, prefixes, forks = [], [], []
        for k, (i, tokens) in enumerate(zip(first, out.completions, strict=True)):
            flags = out.inserted[k] if out.inserted else [0] * len(tokens)
            pieces = [self.vocab.decode([t]) for t in tokens]
            for p, prob in arpo.branch_points(pieces, flags, out.entropies[k]):
                if left[i] <= 0 or not 0 < p < self.cfg.max_new_tokens:
                    continue
                z = min(arpo.branches, left[i]) if self.rng.random() < prob else 0
                arpo.record(z)
                left[i] -= z
                rows += [i] * z
                prefixes += [tokens[:p]] * z
                forks += [(family + k, p)] * z
        if rows:
            # One batch for every branch, as long as the longest one may run; each is then cut to its own budget.
            budget = self.cfg.max_new_tokens - min(len(q) for q in prefixes)
            more = self._generate(groups, rows, prefixes, budget)
            cut = [self.cfg.max_new_tokens - len(q) for q in prefixes]
            root_flags = [
                out.inserted[f - family] if out.inserted else [0] * len(q)
                for (f, _), q in zip(forks, prefixes, strict=True)
            ]
            root_ents = [out.entropies[f - family] for f, _ in forks]
            more = Samples(
                [q + c[:n] for q, c, n in zip(prefixes, more.completions, cut, strict=True)],
                more.mean_entropy,
                [f[: len(q)] + g[:n] for f, q, g, n in zip(root_flags, prefixes, more.inserted, cut, strict=True)],
                [],
                [e[: len(q)] + h[:n] for e, q, h, n in zip(root_ents, prefixes, more.entropies, cut, strict=True)],
            )
            parts.append((rows, more, forks))
        whole = [i for i, n in enumerate(left) for _ in range(n)]
        if whole:
            arpo.record(0, supplemented=len(whole))
            start = family + len(first) + len(rows)
            parts.append((whole, self._generate(groups, whole), [(start + k, 0) for k in range(len(whole))]))
        return parts

    def _sample_stage(self, groups: Sequence[Group], counts: Sequence[int], stage: int) -> list[float]:
        rows = [i for i, c in enumerate(counts) for _ in range(int(c))]
        if not rows:
            return []
        if self.branching is not None:
            parts = self._generate_branching(groups, counts)
        else:
            plain = (
                self._generate_eepo(groups, counts) if self.eepo is not None else [(rows, self._generate(groups, rows))]
            )
            parts = [(r, o, None) for r, o in plain]
        for i, c in enumerate(counts):
            if c > 0:
                self.costs.prompt_tokens += len(groups[i].prompt_ids)
                if stage > 0:
                    self.costs.prompt_tokens_extra_stages += len(groups[i].prompt_ids)
        entropies: list[float] = []
        for part_rows, out, forks in parts:
            for k, (i, tokens) in enumerate(zip(part_rows, out.completions, strict=True)):
                reward = float(self.reward_fn(groups[i].task, self.vocab.decode(tokens)))
                inserted = out.inserted[k] if self.tool is not None else None
                response = Response(tokens, reward, inserted=inserted)
                if out.temperatures:
                    response.temperatures, response.entropies = out.temperatures[k], out.entropies[k]
                if forks is not None:
                    response.family, response.shared = forks[k]
                groups[i].responses.append(response)
                self.costs.responses += 1
                self.costs.completion_tokens += len(tokens) - response.shared  # a branch's prefix is cached
            entropies += [out.mean_entropy] * len(part_rows)
        return entropies

    # --- guidance interface (meta.rlvr.guidance.GuidedTrainer) -----------------------------------------------------
    def reward(self, task: Task, text: str) -> float:
        """The verifier's reward of a completion text (``reward_fn``)."""
        return float(self.reward_fn(task, text))

    def generate_for(self, contexts: Sequence[list[int]]) -> list[list[int]]:
        """One sampled completion per context (prompt ids with a hint or a budget), for a guidance controller.

        Counted in the ledger like a stage: the responses, their tokens, and each distinct context's tokens once
        (a prefix-caching server reads a repeated context once).
        """
        if not contexts:
            return []
        out = sample(
            self.model,
            contexts,
            max_new_tokens=self.cfg.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=self.generator,
            suppress=self.suppress,
        )
        self.costs.responses += len(contexts)
        self.costs.completion_tokens += sum(len(c) for c in out.completions)
        self.costs.prompt_tokens += sum(len(c) for c in {tuple(c) for c in contexts})
        self._entropy_sink += [out.mean_entropy] * len(contexts)
        return out.completions

    @staticmethod
    def add_response(
        group: Group,
        tokens: list[int],
        reward: float,
        *,
        context: list[int] | None = None,
        forced: int = 0,
        condition: int | None = None,
    ) -> None:
        """Append a scored response to ``group`` (see :class:`Response` for ``context``, ``forced``, ``condition``)."""
        if not 0 <= forced <= len(tokens):
            raise ValueError(f"forced must be in 0..{len(tokens)}, got {forced}")
        group.responses.append(Response(tokens, reward, context=context, forced=forced, condition=condition))

    def _rollout(self, tasks: Sequence[Task]) -> tuple[list[Group], list[float]]:
        """Run the allocator's stages for ``tasks``; returns the groups and per-response entropies."""
        groups = [Group(t, self.vocab.encode(t.prompt, bos=True)) for t in tasks]
        keys = [t.prompt for t in tasks]
        entropies: list[float] = []

        def generate(counts: list[int], stage: int) -> None:
            entropies.extend(self._sample_stage(groups, counts, stage))

        def stages() -> None:
            run_stages(self.allocator, keys, self.stats, generate, lambda: [g.rewards for g in groups])

        if self.guidance is not None:
            self._entropy_sink = entropies
            self.guidance.rollout(self, groups, stages)
        else:
            stages()
        for g in groups:
            if g.responses:
                self.stats.update(g.task.prompt, g.rewards, [len(r.tokens) for r in g.responses])
                self.costs.groups += 1
                self.costs.zero_variance_groups += int(not is_mixed(g.rewards))
        if self.buffer is not None:
            for g in groups:
                stored = reuse_or_store(self.buffer, g.task.prompt, [r.tokens for r in g.responses], g.rewards)
                if stored is not None:
                    # The verifier's reward from when it was stored, not a fixed 1.0: rewards on another scale
                    # (or with partial credit) keep the group's advantages on the fresh responses' scale.
                    g.responses.append(Response(stored.tokens, stored.reward, reused=True))
                    self.costs.reused_responses += 1
                    self.costs.reused_tokens += len(stored.tokens)
        return groups, entropies

    def _drop(self, groups: Sequence[Group]) -> None:
        for g in groups:
            generated = [r for r in g.responses if not r.reused]
            self.costs.dropped_responses += len(generated)
            self.costs.dropped_tokens += sum(len(r.tokens) for r in generated)

    # --- one step ------------------------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        """One GRPO step; returns step metrics (the cumulative :attr:`costs` are updated in place).

        ``cost/*`` are the cumulative :class:`~meta.rlvr.allocators.staging.CostLedger` fields and ``step_cost/*`` this
        step's share of them. Besides the rollout metrics, ``loss`` is the mean loss over the step's optimizer steps,
        ``optimizer_steps`` their number, ``clip_fraction`` the share of learning tokens whose gradient the clip
        removed (ratio beyond the bound on the side its advantage pushes), ``ratio_min`` / ``ratio_max`` the extreme
        ratios seen, and ``clip_low`` / ``clip_high`` the ratio bounds of the last optimizer step. ``tool_calls``,
        ``answer_length`` and ``slow_share`` are :func:`response_measures` of the step's generated responses.
        """
        before = self.costs.as_dict()
        groups, entropies = self._rollout(self._draw(self.cfg.prompts_per_step))
        generated_rewards = [[r.reward for r in g.responses if not r.reused] for g in groups]
        keep = self.allocator.keep([g.rewards for g in groups])
        kept = [g for g, k in zip(groups, keep, strict=True) if k]
        self._drop([g for g, k in zip(groups, keep, strict=True) if not k])
        generated_groups = len(groups)
        mixed_groups = sum(is_mixed(g.rewards) for g in groups)
        rounds = 0
        max_rounds = int(getattr(self.allocator, "max_rounds", 0))
        while self.allocator.refill and len(kept) < self.cfg.prompts_per_step and rounds < max_rounds:
            more, ent = self._rollout(self._draw(self.cfg.prompts_per_step - len(kept)))
            generated_rewards += [[r.reward for r in g.responses if not r.reused] for g in more]
            entropies += ent
            keep = self.allocator.keep([g.rewards for g in more])
            kept += [g for g, k in zip(more, keep, strict=True) if k]
            self._drop([g for g, k in zip(more, keep, strict=True) if not k])
            generated_groups += len(more)
            mixed_groups += sum(is_mixed(g.rewards) for g in more)
            rounds += 1
        if len(kept) > self.cfg.prompts_per_step:
            self._drop(kept[self.cfg.prompts_per_step :])
            kept = kept[: self.cfg.prompts_per_step]
        update = self._update(kept)
        if self.token_controller is not None:
            # The statistics the next step's tokens are normalised with: this step's sampled tokens.
            self.token_controller.decide({"entropies": self._step_entropies(groups)})
        mean_entropy = float(np.mean(entropies)) if entropies else 0.0
        if self.temperature_controller is not None and entropies:
            self.temperature = self.temperature_controller.decide({"entropy": mean_entropy})
        self.num_steps += 1
        # Solve rate of every group generated this step (refills included), for controllers that watch the
        # distribution (the RLVR meta-MDP's solve-rate histogram, :mod:`meta.rlvr.meta_mdp`).
        self.last_solve_rates = [float(np.mean(r)) for r in generated_rewards if r]
        generated = [r for g in groups for r in g.responses if not r.reused]
        rewards = [r.reward for r in generated]
        measures = response_measures(
            [self.vocab.decode(r.tokens) for r in generated], [r.policy_tokens for r in generated]
        )
        return {
            "step": self.num_steps,
            **update,
            "reward_mean": float(np.mean(rewards)) if rewards else 0.0,
            **measures,
            "groups_generated": generated_groups,
            "groups_mixed": mixed_groups,
            "groups_kept": len(kept),
            "refill_rounds": rounds,
            "entropy": mean_entropy,
            "temperature": self.temperature,
            **{f"cost/{k}": v for k, v in self.costs.as_dict().items()},
            **{f"step_cost/{k}": v for k, v in self.costs.since(before).items()},
        }

    def _shaped_rewards(self, g: Group) -> list[float]:
        if self.branching is not None:
            return self.branching.shape(g.rewards, [r.policy_tokens for r in g.responses])
        if self.length_penalty is None:
            return g.rewards
        return self.length_penalty.shape(g.rewards, [len(r.tokens) for r in g.responses])

    def _token_temperature(self, entropy: torch.Tensor) -> torch.Tensor:
        assert self.token_controller is not None
        temps = self.token_controller.temperatures(entropy.detach().cpu().numpy(), self.temperature)
        return torch.as_tensor(temps, dtype=torch.float32)

    @staticmethod
    def _step_entropies(groups: Sequence[Group]) -> list[float]:
        """Per-token base-temperature entropies of the step's sampled (not inserted) tokens."""
        out: list[float] = []
        for g in groups:
            for r in g.responses:
                if r.entropies is not None:
                    flags = r.inserted or [0] * len(r.entropies)
                    out += [e for e, f in zip(r.entropies, flags, strict=True) if not f]
        return out

    def _advantages(self, g: Group) -> list[float]:
        if self.guidance is not None:
            own = self.guidance.advantages(g, self.cfg.advantage)
            if own is not None:
                return own
        rewards = self._shaped_rewards(g)
        if self.token_controller is not None and self.token_controller.token_advantage:
            lengths = [r.policy_tokens for r in g.responses]
            return token_group_advantages(rewards, lengths, std=self.cfg.advantage == "grpo")
        return group_advantages(rewards, self.cfg.advantage)

    def _bounds(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
        if self.clip_controller is None:
            return 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
        return self.clip_controller.decide(
            {
                "ratios": ratio.detach()[mask > 0].cpu().numpy(),
                "advantages": adv.expand_as(ratio)[mask > 0].cpu().numpy(),
            }
        )

    def _update(self, groups: Sequence[Group]) -> dict[str, float]:
        """Minibatched clipped policy-gradient update on ``groups``; returns the update metrics of :meth:`step`."""
        low, high = 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
        metrics: dict[str, float] = {
            "loss": 0.0,
            "optimizer_steps": 0,
            "clip_fraction": 0.0,
            "ratio_min": 1.0,
            "ratio_max": 1.0,
            "clip_low": low,
            "clip_high": high,
        }
        rows: list[_Row] = []
        responses: list[Response] = []
        lengths: list[int] = []
        for g in groups:
            adv = self._advantages(g)
            if self.branching is not None:
                self._branching_rows(g, adv, rows, responses, lengths)
                continue
            for r, a in zip(g.responses, adv, strict=True):
                # Tokens a tool inserted are not the model's choice: they count neither here nor in the loss.
                lengths.append(r.policy_tokens)
                # Zero-advantage rows add nothing to the policy-gradient term; they only count in the normaliser,
                # so they are skipped in the forward pass unless a KL term needs them.
                if (a != 0.0 or self.ref_model is not None) and r.tokens:
                    prompt = g.prompt_ids if r.context is None else r.context
                    rows.append((prompt, r.tokens, a, r.inserted if r.inserted and any(r.inserted) else None))
                    responses.append(r)
        self.costs.rows_trained += len(lengths)
        self.costs.tokens_trained += sum(lengths)
        if not rows or sum(lengths) == 0:
            return metrics
        chunks = [c for c in np.array_split(np.arange(len(rows)), min(self.cfg.minibatches, len(rows))) if c.size]
        # Each minibatch's loss is its part of the batch loss times the number of minibatches: at the sampling policy
        # the minibatch losses average to the full-batch loss, and one minibatch is exactly the full-batch step.
        normaliser = loss_normaliser(self.loss_kind, lengths, self.cfg.max_new_tokens) / len(chunks)
        off_policy = len(chunks) * self.cfg.epochs > 1
        self.model.train()
        batches: list[_Minibatch] = []
        with torch.no_grad():
            for idx in chunks:
                prompts = [rows[int(i)][0] for i in idx]
                completions = [rows[int(i)][1] for i in idx]
                mb = _Minibatch(prompts, completions, torch.zeros(0), None, None, self._policy_mask(rows, idx))
                self._token_rules(mb, [responses[int(i)] for i in idx])
                # π_old is the policy that sampled the batch: computed now, before any step, with the same rows and
                # padding as the minibatch's forward pass, so the first step's ratio is exactly 1. Reused responses
                # get the same treatment (AR3PO: the current policy as the old one).
                forced = [responses[int(i)].forced for i in idx]
                if off_policy or any(forced):
                    mb.old_logp = self._logprobs(self.model, prompts, completions, mb)[0]
                    # Guide: the hint tokens were given, not sampled: behaviour probability 1
                    # (meta.rlvr.guidance.guide).
                    for j, f in enumerate(forced):
                        if f:
                            mb.old_logp[j, :f] = 0.0
                if self.ref_model is not None:
                    mb.ref_logp = self._logprobs(self.ref_model, prompts, completions, mb)[0]
                mb.advantages = self._advantage_tensor([rows[int(i)][2] for i in idx], completions)
                batches.append(mb)
        losses: list[float] = []
        clipped, counted = 0, 0
        ratio_min, ratio_max = math.inf, -math.inf
        for _ in range(self.cfg.epochs):
            for mb in batches:
                logp, mask = self._logprobs(self.model, mb.prompts, mb.completions, mb)
                if mb.policy_mask is not None:
                    mask = mask * mb.policy_mask
                # One optimizer step per batch: the sampling policy *is* the current one and the ratio is exactly 1.
                old_logp = logp.detach() if mb.old_logp is None else mb.old_logp
                ratio = torch.exp(logp - old_logp)
                a_t = mb.advantages
                if mb.eps_low is not None and mb.eps_high is not None:  # per-token bounds (HAPO)
                    low_t, high_t = 1.0 - mb.eps_low, 1.0 + mb.eps_high
                    clipped_ratio = torch.clamp(ratio, low_t, high_t)
                    low, high = float(low_t.mean()), float(high_t.mean())
                else:
                    low, high = self._bounds(ratio, a_t, mask)
                    clipped_ratio = torch.clamp(ratio, low, high)
                    low_t, high_t = torch.tensor(low), torch.tensor(high)
                per_token = -torch.min(ratio * a_t, clipped_ratio * a_t)
                if mb.ref_logp is not None:
                    delta = mb.ref_logp - logp
                    per_token = per_token + self.cfg.kl_coef * (torch.exp(delta) - delta - 1.0)
                loss = aggregate_loss(per_token, mask, self.loss_kind, normaliser)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
                self.optimizer.step()
                losses.append(float(loss.detach()))
                with torch.no_grad():
                    tokens = mask > 0
                    learning = tokens & (a_t != 0).expand_as(mask)
                    rho = ratio.detach()
                    # The clip removes a token's gradient once its ratio is past the bound its advantage pushes toward.
                    cut = ((a_t > 0) & (rho > high_t.to(rho.device))) | ((a_t < 0) & (rho < low_t.to(rho.device)))
                    clipped += int((cut & learning).sum())
                    counted += int(learning.sum())
                    if bool(tokens.any()):
                        ratio_min = min(ratio_min, float(rho[tokens].min()))
                        ratio_max = max(ratio_max, float(rho[tokens].max()))
        metrics.update(
            loss=float(np.mean(losses)),
            optimizer_steps=len(losses),
            clip_fraction=clipped / counted if counted else 0.0,
            ratio_min=ratio_min if math.isfinite(ratio_min) else 1.0,
            ratio_max=ratio_max if math.isfinite(ratio_max) else 1.0,
            clip_low=float(low),
            clip_high=float(high),
        )
        return metrics

    def _branching_rows(
        self, g: Group, adv: Sequence[float], rows: list[_Row], responses: list[Response], lengths: list[int]
    ) -> None:
        """Branching rollout's learning rows of ``g``: per-token advantages over shared prefixes, counted once."""
        families = [r.family if r.family is not None else -1 - j for j, r in enumerate(g.responses)]
        token_adv, owned = prefix_advantages([r.tokens for r in g.responses], adv, families)
        for r, a, own in zip(g.responses, token_adv, owned, strict=True):
            flags = r.inserted or [0] * len(r.tokens)
            # Left out of the loss: the tool's insertions and the shared tokens another row owns.
            out = [int(f or not o) for f, o in zip(flags, own, strict=True)]
            lengths.append(len(out) - sum(out))
            if r.tokens and (self.ref_model is not None or any(x != 0.0 for x, o in zip(a, out, strict=True) if not o)):
                rows.append((g.prompt_ids, r.tokens, a, out if any(out) else None))
                responses.append(r)

    def _advantage_tensor(
        self, advantages: Sequence[float | list[float]], completions: Sequence[list[int]]
    ) -> torch.Tensor:
        """``(rows, 1)`` advantages, or ``(rows, width)`` when some row has per-token ones (zero past its end)."""
        if all(isinstance(a, float) for a in advantages):
            return torch.tensor(advantages, dtype=torch.float32, device=self.device).unsqueeze(1)
        width = max(max((len(c) for c in completions), default=0), 1)
        out = torch.zeros((len(advantages), width), dtype=torch.float32)
        for j, a in enumerate(advantages):
            if isinstance(a, float):
                out[j] = a
            else:
                out[j, : len(a)] = torch.tensor(a, dtype=torch.float32)
        return out.to(self.device)

    def _token_rules(self, mb: _Minibatch, responses: Sequence[Response]) -> None:
        """Fill ``mb``'s per-token temperatures and clip bounds from its responses (HAPO; no-op without it)."""
        if self.token_controller is None:
            return
        width = max(max(len(r.tokens) for r in responses), 1)
        temps = torch.ones((len(responses), width), dtype=torch.float32)
        h_hat = torch.zeros((len(responses), width), dtype=torch.float32)
        for j, r in enumerate(responses):
            if r.temperatures is not None and r.entropies is not None and r.tokens:
                temps[j, : len(r.tokens)] = torch.tensor(r.temperatures, dtype=torch.float32)
                # The statistics have not moved since this batch was sampled (they update after the step).
                h = self.token_controller.h_hat(np.asarray(r.entropies))
                h_hat[j, : len(r.tokens)] = torch.as_tensor(h, dtype=torch.float32)
        low, high = self.token_controller.clip_bounds(h_hat.numpy(), self.cfg.clip_low, self.cfg.clip_high)
        mb.temperatures = temps.to(self.device)
        mb.eps_low = torch.as_tensor(low, dtype=torch.float32).to(self.device)
        mb.eps_high = torch.as_tensor(high, dtype=torch.float32).to(self.device)

    def _policy_mask(self, rows: Sequence[_Row], idx: np.ndarray) -> torch.Tensor | None:
        """``(rows, width)`` mask, 0 on tool-inserted tokens, or ``None`` when no row of ``idx`` has insertions."""
        picked = [rows[int(i)] for i in idx]
        if all(r[3] is None for r in picked):
            return None
        width = max(max(len(r[1]) for r in picked), 1)
        out = torch.ones((len(picked), width), dtype=torch.float32)
        for j, r in enumerate(picked):
            if r[3] is not None:
                out[j, : len(r[3])] = 1.0 - torch.tensor(r[3], dtype=torch.float32)
        return out.to(self.device)

    def _logprobs(
        self,
        model: torch.nn.Module,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        mb: _Minibatch | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        temperature: float | torch.Tensor = self.temperature
        if mb is not None and mb.temperatures is not None:
            temperature = mb.temperatures
        return sequence_logprobs(
            model, prompts, completions, self.vocab.pad_id, temperature=temperature, suppress=self.suppress
        )

    # --- evaluation ----------------------------------------------------------------------------------------------
    def evaluate(self, tasks: Sequence[Task], batch_size: int = 256) -> float:
        """Greedy-decoding accuracy on ``tasks`` (held-out set), in [0, 1] for the default 0/1 verifier."""
        return self.evaluate_details(tasks, batch_size)["accuracy"]

    def evaluate_details(self, tasks: Sequence[Task], batch_size: int = 256) -> dict[str, float]:
        """Greedy decoding on ``tasks``: accuracy plus the answers' :func:`response_measures` and ``entropy``, the
        mean next-token entropy (nats, temperature 1) of the policy along its greedy answers (tool insertions left
        out). Deterministic, and defined before any training step, so it tracks entropy collapse over training."""
        if not tasks:
            return {
                "accuracy": math.nan,
                "tool_calls": math.nan,
                "answer_length": math.nan,
                "slow_share": math.nan,
                "entropy": math.nan,
            }
        correct, entropy_sum = 0.0, 0.0
        texts: list[str] = []
        lengths: list[int] = []
        for start in range(0, len(tasks), batch_size):
            chunk = tasks[start : start + batch_size]
            out = sample(
                self.model,
                [self.vocab.encode(t.prompt, bos=True) for t in chunk],
                max_new_tokens=self.cfg.max_new_tokens,
                eos_id=self.vocab.eos_id,
                pad_id=self.vocab.pad_id,
                temperature=0.0,
                suppress=self.suppress,
                tool=self.tool,
            )
            chunk_texts = [self.vocab.decode(c) for c in out.completions]
            correct += sum(self.reward_fn(t, c) for t, c in zip(chunk, chunk_texts, strict=True))
            chunk_lengths = [
                len(c) - sum(f) for c, f in zip(out.completions, out.inserted or [[]] * len(chunk), strict=True)
            ]
            entropy_sum += out.mean_entropy * sum(chunk_lengths)
            texts += chunk_texts
            lengths += chunk_lengths
        return {
            "accuracy": correct / len(tasks),
            **response_measures(texts, lengths),
            "entropy": entropy_sum / max(sum(lengths), 1),
        }

    # --- state ---------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The trainer's whole mutable state as plain data (tensors, numbers, strings, lists, dicts).

        Model and optimizer ``state_dict``s, the frozen reference model (when ``kl_coef > 0``), the trainer's numpy
        and torch generators and the global random streams (:func:`rolloutlab.run_state.capture_rng`, in case a model
        layer draws from them), the prompt order and cursor, step counter, sampling temperature, cost ledger,
        per-prompt statistics, response buffer and the allocator's and controllers' states. :meth:`load_state_dict`
        on a trainer built with the same arguments continues exactly where this one stopped.
        """
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "ref_model": self.ref_model.state_dict() if self.ref_model is not None else None,
            "rng": capture_rng({"run": self.rng, "generator": self.generator}),
            "order": [int(i) for i in self._order],
            "cursor": self._cursor,
            "num_steps": self.num_steps,
            "temperature": self.temperature,
            "costs": self.costs.as_dict(),
            "stats": self.stats.state_dict(),
            "buffer": self.buffer.state_dict() if self.buffer is not None else None,
            "allocator": self.allocator.state_dict(),
            "temperature_controller": self._controller_state(self.temperature_controller),
            "length_penalty": self._controller_state(self.length_penalty),
            "clip_controller": self._controller_state(self.clip_controller),
            "token_controller": self._controller_state(self.token_controller),
            "eepo": self._controller_state(self.eepo),
            "branching": self._controller_state(self.branching),
        }
        if self.guidance is not None:  # only then: the snapshot of a run without guidance is as it always was
            state["guidance"] = self.guidance.state_dict()
        return state

    @staticmethod
    def _controller_state(controller: Any) -> dict[str, Any] | None:
        return controller.state_dict() if controller is not None else None

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot into this (identically configured) trainer.

        Raises:
            ValueError: The snapshot does not fit this trainer (another prompt pool size, reuse on one side only, a
                KL reference on one side only, or a snapshot from before the current RNG layout).
        """
        if "generator" in state:
            raise ValueError("the snapshot predates the trainer's current RNG layout (rolloutlab.run_state)")
        order = [int(i) for i in state["order"]]
        if sorted(order) != list(range(len(self.tasks))):
            raise ValueError(f"the snapshot's prompt order has {len(order)} prompts, this pool {len(self.tasks)}")
        if (state["buffer"] is None) != (self.buffer is None):
            raise ValueError("the snapshot and this trainer disagree on response reuse (allocator differs)")
        if (state["ref_model"] is None) != (self.ref_model is None):
            raise ValueError("the snapshot and this trainer disagree on the KL reference model (kl_coef differs)")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.ref_model is not None:
            self.ref_model.load_state_dict(state["ref_model"])
        restore_rng(state["rng"], {"run": self.rng, "generator": self.generator})
        self._order = np.asarray(order, dtype=np.int64)
        self._cursor = int(state["cursor"])
        self.num_steps = int(state["num_steps"])
        self.temperature = float(state["temperature"])
        self.costs = CostLedger.from_dict(state["costs"])
        self.stats.load_state_dict(state["stats"])
        if self.buffer is not None:
            self.buffer.load_state_dict(state["buffer"])
        self.allocator.load_state_dict(state["allocator"])
        for name in (
            "temperature_controller",
            "length_penalty",
            "clip_controller",
            "token_controller",
            "eepo",
            "branching",
            "guidance",
        ):
            controller = getattr(self, name)
            if controller is not None and state.get(name) is not None:
                controller.load_state_dict(state[name])
