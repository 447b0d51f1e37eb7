"""A compact GRPO trainer for small causal LMs, with per-prompt allocators and exact cost accounting.

One step (Shao et al. 2024, GRPO; Yu et al. 2025, DAPO):

1. draw ``prompts_per_step`` prompts; the allocator (:mod:`meta.rlvr.allocators`) sets each prompt's first-stage
   count, then, stage by stage, how many more responses each prompt gets given this step's rewards so far;
2. sample with a KV cache (:mod:`meta.rlvr.lm.sampling`) and score every response with the verifier;
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
6. the per-token loss is aggregated by one of three normalisers (:func:`~.grpo_loss.loss_normaliser`): per
   sequence, then over sequences (``loss="sequence"``, GRPO eq. 3); over all tokens of the batch (``loss="dapo"``, DAPO
   eq. 12); or by the constant ``max_new_tokens × responses`` (``loss="dr_grpo"``, Dr. GRPO, the default with
   ``advantage="dr_grpo"``).

The stages and response reuse follow the protocol of :mod:`meta.rlvr.allocators.staging`, shared with the TRL adapter.
Cost accounting (:class:`~meta.rlvr.allocators.staging.CostLedger`) is exact: responses and completion tokens generated
(EOS included), prompt tokens read (each prompt once per stage in which it is sampled, as a prefix-caching server would;
the part due to stages after the first kept apart), responses and tokens in dropped groups, reused responses counted
separately (they cost no generation), and the rows and tokens the loss was computed on.

The trainer's whole state (model, optimizer, reference model, random generators, prompt order, statistics, response
buffer, controllers, costs) is plain data in :meth:`GRPOTrainer.state_dict`, so a run can be checkpointed and resumed
bit-identically (:mod:`meta.rlvr.trainers.run`).

The trainer is assembled from modules of :mod:`meta.rlvr.trainers` that each hold one part: its settings
(``grpo_config``), the sampled responses and groups (``grpo_groups``), the advantage and loss math (``grpo_loss``), the
rollout (``grpo_rollout.GRPORollout``) and the update (``grpo_update.GRPOUpdate``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task, verify
from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.allocators.reuse import ResponseBuffer
from meta.rlvr.allocators.staging import CostLedger
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.guidance import Guidance
from meta.rlvr.lm.sampling import ToolHook, sample
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.arpo import BranchingRollout
from meta.rlvr.token.clipping import BalancedClip
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.token.temperature import EntropyTemperature
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, RewardFn, response_measures
from meta.rlvr.trainers.grpo_rollout import GRPORollout
from meta.rlvr.trainers.grpo_update import GRPOUpdate
from rolloutlab.device import resolve_device
from rolloutlab.run_state import capture_rng, restore_rng


class GRPOTrainer(GRPORollout, GRPOUpdate):
    """GRPO with a pluggable per-prompt allocator.

    Args:
        model: Causal LM (Hugging Face ``PreTrainedModel`` or a module with the same forward); moved to
            ``config.device`` here.
        vocab: Encodes prompts, decodes completions.
        tasks: Training prompt pool, visited in shuffled epochs.
        allocator: Decides responses per prompt (and stages, dropping, reuse).
        config: :class:`~meta.rlvr.trainers.grpo_config.GRPOConfig`.
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

    # --- one step ------------------------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        """One GRPO step; returns step metrics (the cumulative :attr:`costs` are updated in place).

        ``cost/*`` are the cumulative :class:`~meta.rlvr.allocators.staging.CostLedger` fields and ``step_cost/*`` this
        step's share of them. Besides the rollout metrics, ``loss`` is the mean loss over the step's optimizer steps,
        ``optimizer_steps`` their number, ``clip_fraction`` the share of learning tokens whose gradient the clip
        removed (ratio beyond the bound on the side its advantage pushes), ``ratio_min`` / ``ratio_max`` the extreme
        ratios seen, and ``clip_low`` / ``clip_high`` the ratio bounds of the last optimizer step. ``tool_calls``,
        ``answer_length`` and ``slow_share`` are :func:`~meta.rlvr.trainers.grpo_groups.response_measures` of the step's
        generated responses.
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

    # --- evaluation ----------------------------------------------------------------------------------------------
    def evaluate(self, tasks: Sequence[Task], batch_size: int = 256) -> float:
        """Greedy-decoding accuracy on ``tasks`` (held-out set), in [0, 1] for the default 0/1 verifier."""
        return self.evaluate_details(tasks, batch_size)["accuracy"]

    def evaluate_details(self, tasks: Sequence[Task], batch_size: int = 256) -> dict[str, float]:
        """Greedy decoding on ``tasks``: accuracy plus the answers' ``response_measures`` (``grpo_groups``)
        and ``entropy``, the mean next-token entropy (nats, temperature 1) of the policy along its greedy answers (tool
        insertions left out). Deterministic, and defined before any training step, so it tracks entropy collapse over
        training."""
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
