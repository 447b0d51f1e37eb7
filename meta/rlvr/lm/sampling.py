"""KV-cached sampling and per-token log-probabilities for causal LMs with a Hugging Face style forward.

The model is called as ``model(input_ids=..., attention_mask=..., position_ids=..., <cache>=..., use_cache=True)`` and
returns an object with ``.logits`` and the cache (``.cache`` in transformers ≥ 5.2x, ``.past_key_values`` before);
both spellings are supported. Prompts of different lengths are left-padded, with position ids counted from each row's
first real token so padding does not shift positions.

Both functions run on the model's device (that of its first parameter): token ids go there, and results come back as
Python lists (:func:`sample`) or tensors on that device (:func:`sequence_logprobs`). :func:`sample` draws each token
on its generator's device, so a CPU ``torch.Generator`` gives the same draws whatever device the model is on (for the
small vocabularies here, moving one row of probabilities per token to the CPU costs little).

Tool calls (:class:`ToolHook`): when a row samples the hook's ``trigger`` token, the hook sees the row's completion so
far and may return tokens the environment inserts (a calculator's result after ``</calc>``). They are fed to the
model one per decoding step, as if sampled, so the batch stays in lockstep and the KV cache stays valid; they count
towards ``max_new_tokens`` and are marked in :attr:`Samples.inserted`, so the trainer can keep them out of the
policy-gradient loss (the model did not choose them) and out of the entropy average.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch


class ToolHook(Protocol):
    """Environment side of a tool call during sampling (e.g. :class:`meta.rlvr.trainers.tools.CalculatorTool`).

    Attributes:
        trigger: The token id after which :meth:`respond` is asked (the last token of a closing tag).
    """

    trigger: int

    def respond(self, completion: Sequence[int]) -> Sequence[int]:
        """Token ids to insert after ``completion`` (the row's tokens so far, trigger included); empty for none."""
        ...


@dataclass
class Samples:
    """Sampled completions.

    Attributes:
        completions: Token ids per row, ending with EOS if one was produced (EOS counted as a generated token).
        mean_entropy: Mean next-token entropy (nats) over all sampled tokens, at the sampling temperature (tokens a
            tool inserted are left out).
        inserted: Per row, 1 where the token was inserted by the tool hook, 0 where the model sampled it (same
            length as the completion); empty when no hook was given.
        temperatures: Per row, the temperature each token was drawn at (``token_temperature`` given; else empty).
        entropies: Per row, each token's next-token entropy (nats) at the base temperature, the quantity a
            ``token_temperature`` rule reads (``token_temperature`` given or ``record_entropies``; else empty).
    """

    completions: list[list[int]]
    mean_entropy: float
    inserted: list[list[int]] = field(default_factory=list)
    temperatures: list[list[float]] = field(default_factory=list)
    entropies: list[list[float]] = field(default_factory=list)


def _cache_kwarg(model: torch.nn.Module) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _cache_out(output: object) -> object:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (the CPU for a model without parameters)."""
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into ``(ids, mask)``, both ``(batch, max_len)`` long tensors."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.as_tensor(list(r), dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids, mask


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    suppress: Sequence[int] = (),
    tool: ToolHook | None = None,
    token_temperature: Callable[[torch.Tensor], torch.Tensor] | None = None,
    record_entropies: bool = False,
) -> Samples:
    """Sample one completion per prompt row with a KV cache.

    Args:
        model: Causal LM (see module docstring for the forward contract).
        prompts: Prompt token ids per row (repeat a prompt to get several responses).
        max_new_tokens: Most tokens generated per row (EOS included).
        eos_id: End-of-sequence id; a row stops after producing it.
        pad_id: Padding id.
        temperature: Softmax temperature; ``0`` means greedy decoding.
        generator: Torch generator for reproducible sampling; tokens are drawn on its device (``None``: the model's
            device and its global generator).
        suppress: Token ids never to sample (e.g. pad and BOS); :func:`sequence_logprobs` must get the same list.
        tool: Optional tool hook (module docstring). ``generator`` is drawn from exactly as without one (one draw
            per row and step, an inserted token replacing its row's draw), so a model that never emits the trigger
            samples the same completions with or without the hook.
        token_temperature: Optional per-token temperature rule (HAPO): maps each row's next-token entropy at
            ``temperature`` (a ``(batch,)`` tensor, nats) to the temperature that row's token is drawn at. Ignored
            for greedy decoding. :func:`sequence_logprobs` must then get :attr:`Samples.temperatures`.
        record_entropies: Fill :attr:`Samples.entropies` without a ``token_temperature`` rule (ARPO reads the
            entropy after tool results); the draws are unchanged.

    Returns:
        :class:`Samples`.
    """
    if not prompts:
        return Samples([], 0.0)
    was_training = model.training
    model.eval()
    cache_kw = _cache_kwarg(model)
    device = model_device(model)
    ids, mask = left_pad(prompts, pad_id)
    ids, mask = ids.to(device), mask.to(device)
    batch = ids.shape[0]
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache = _cache_out(out)
    logits = out.logits[:, -1, :]
    next_pos = positions[:, -1] + 1
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    generated = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    entropy_sum, entropy_count = 0.0, 0
    banned = torch.as_tensor(list(suppress), dtype=torch.long, device=device)
    # Tool hook: per row, tokens still to insert, and the 0/1 "inserted" flag of every generated position.
    pending: list[list[int]] = [[] for _ in range(batch)]
    forced_flags = torch.zeros((batch, max_new_tokens), dtype=torch.bool)
    per_token = token_temperature is not None and temperature > 0
    temps_out = torch.zeros((batch, max_new_tokens))
    base_entropy_out = torch.zeros((batch, max_new_tokens))
    for t in range(max_new_tokens):
        logits = logits.float()
        if len(banned):
            logits[:, banned] = float("-inf")
        if per_token:
            assert token_temperature is not None
            base = torch.log_softmax(logits / temperature, dim=-1)
            base_entropy = -(base.exp() * base.nan_to_num(neginf=0.0)).sum(dim=-1)
            row_t = token_temperature(base_entropy).to(device=device, dtype=logits.dtype)
            temps_out[:, t] = row_t.cpu()
            base_entropy_out[:, t] = base_entropy.cpu()
            logp = torch.log_softmax(logits / row_t.unsqueeze(1), dim=-1)
            probs = logp.exp() if generator is None else logp.exp().to(generator.device)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1).to(device)
        elif temperature > 0:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            probs = logp.exp() if generator is None else logp.exp().to(generator.device)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1).to(device)
        else:
            logp = torch.log_softmax(logits, dim=-1)
            token = logits.argmax(dim=-1)
        active = ~finished
        forced = torch.zeros(batch, dtype=torch.bool, device=device)
        if tool is not None and any(pending):
            for row, queue in enumerate(pending):
                if queue and not bool(finished[row]):
                    token[row] = queue.pop(0)
                    forced[row] = True
            forced_flags[:, t] = forced.cpu()
        probs = logp.exp()
        entropy = -(probs * logp.nan_to_num(neginf=0.0)).sum(dim=-1)
        if record_entropies and not per_token:
            base_entropy_out[:, t] = entropy.cpu()
        entropy_sum += float(entropy[active & ~forced].sum())
        entropy_count += int((active & ~forced).sum())
        token = torch.where(finished, torch.full_like(token, pad_id), token)
        generated[:, t] = token
        if tool is not None:
            for row in ((token == tool.trigger) & active & ~forced).nonzero().flatten().tolist():
                pending[row] = [int(i) for i in tool.respond(generated[row, : t + 1].tolist())]
        finished = finished | (token == eos_id)
        if bool(finished.all()) or t == max_new_tokens - 1:
            break
        mask = torch.cat([mask, (~finished | (token == eos_id)).long().unsqueeze(1)], dim=1)
        out = model(
            input_ids=token.unsqueeze(1),
            attention_mask=mask,
            position_ids=next_pos.unsqueeze(1),
            use_cache=True,
            **{cache_kw: cache},
        )
        cache = _cache_out(out)
        logits = out.logits[:, -1, :]
        next_pos = next_pos + 1
    completions: list[list[int]] = []
    for row in generated.tolist():
        cut: list[int] = []
        for tok in row:
            if tok == pad_id:
                break
            cut.append(tok)
            if tok == eos_id:
                break
        completions.append(cut)
    model.train(was_training)
    inserted = [forced_flags[i, : len(c)].long().tolist() for i, c in enumerate(completions)] if tool else []
    temps = [temps_out[i, : len(c)].tolist() for i, c in enumerate(completions)] if per_token else []
    recorded = per_token or record_entropies
    ents = [base_entropy_out[i, : len(c)].tolist() for i, c in enumerate(completions)] if recorded else []
    return Samples(completions, entropy_sum / max(entropy_count, 1), inserted, temps, ents)


def sequence_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float | torch.Tensor = 1.0,
    suppress: Sequence[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of ``completions`` given ``prompts`` (with gradients).

    Prompts are left-padded and completions right-padded so every row's completion starts at the same column.
    ``temperature`` and ``suppress`` must match the ones used by :func:`sample` for the ratios to be exact;
    ``temperature`` is a number, or a ``(batch, width)`` tensor of per-token temperatures (``width`` the longest
    completion; entries past a row's end are ignored).

    Returns:
        ``(logp, mask)``, both ``(batch, max_completion_len)``; ``mask`` is 1.0 on real completion tokens.
    """
    device = model_device(model)
    p_ids, p_mask = left_pad(prompts, pad_id)
    width = max(max((len(c) for c in completions), default=0), 1)
    c_ids = torch.full((len(completions), width), pad_id, dtype=torch.long)
    c_mask = torch.zeros((len(completions), width), dtype=torch.long)
    for i, c in enumerate(completions):
        if c:
            c_ids[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
            c_mask[i, : len(c)] = 1
    # Built on the CPU row by row, then moved once.
    p_ids, p_mask, c_ids, c_mask = (t.to(device) for t in (p_ids, p_mask, c_ids, c_mask))
    ids = torch.cat([p_ids, c_ids], dim=1)
    mask = torch.cat([p_mask, c_mask], dim=1)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    # Logits at column j predict token j+1: the completion's tokens are predicted by the columns just before them.
    start = p_ids.shape[1]
    pred = logits[:, start - 1 : start - 1 + width, :].float()
    if isinstance(temperature, torch.Tensor):
        pred = pred / temperature.to(device=device, dtype=pred.dtype)[:, :width].unsqueeze(-1)
    elif temperature > 0 and temperature != 1.0:
        pred = pred / temperature
    if suppress:
        # Same support as the sampler: suppressed ids get probability 0 (their logits are -inf).
        pred = pred.index_fill(-1, torch.as_tensor(list(suppress), dtype=torch.long, device=device), float("-inf"))
    logp = torch.log_softmax(pred, dim=-1).gather(-1, c_ids.unsqueeze(-1)).squeeze(-1)
    # Padding positions may hold a suppressed id (log-prob -inf); zero them so masked sums stay finite.
    logp = logp.masked_fill(c_mask == 0, 0.0)
    return logp, c_mask.float()
