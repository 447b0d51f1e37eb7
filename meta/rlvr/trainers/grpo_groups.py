"""What one step of the compact GRPO trainer samples: :class:`Response` and :class:`Group` (a prompt and its responses),
the verifier's signature :data:`RewardFn`, and :func:`response_measures`, the per-answer means of the step log and of
evaluations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from envs.reasoning import Task
from envs.reasoning.tooluse import CALL_CLOSE
from meta.rlvr.token.ehpo import response_mode

#: The verifier: ``(task, completion_text) -> reward``.
RewardFn = Callable[[Task, str], float]


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
    """Per-answer means of a batch of decoded completions: the measures of the step log and of evaluations.

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
