"""EEPO two-stage rollout (Chen et al. 2025, "EEPO: Exploration-Enhanced Policy Optimization via Sample-Then-Forget").

Per group of ``n`` responses: sample the first ``⌈n/2⌉`` from the policy; if the gate opens (their mean token entropy
is below ``entropy_threshold``: the policy is collapsing onto a few answers), take **one unlearning step** on them —
plain gradient *descent on their log-likelihood*, ``θ' = θ − η ∇_θ mean_t log π_θ(y_t)`` over the first half's
tokens, which makes the model less likely to repeat what it just sampled; sample the other ``⌊n/2⌋`` from ``θ'``;
then **restore** ``θ`` exactly and update on the whole group as usual (the second half is treated as if ``θ`` had
sampled it, as in the paper: the perturbation is a sampling device, not part of the policy).

:func:`perturbed` is that step as a context manager: it snapshots every parameter and buffer, applies the step with a
private SGD update (the trainer's optimizer, its moments and the random generators are untouched), and copies the
snapshot back on exit, so the weights afterwards are bit-identical to before (``tests/rlvr/test_rlvr_eepo.py``).
:class:`EEPO` holds the gate and the step size behind the controller protocol.

:class:`EEPO` needs numpy only (``import meta.rlvr`` stays torch-free); :func:`perturbed` imports torch when called.
The spec ``eepo:LR[,ENTROPY_THRESHOLD]`` builds it (:func:`meta.rlvr.token.make_token_controller`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from meta.control import Controller, Feedback

if TYPE_CHECKING:
    import torch


class EEPO(Controller):
    """Gate and step size of the unlearning step.

    Args:
        lr: ``η`` of the unlearning step (plain SGD, > 0).
        entropy_threshold: The step is taken when the first half's mean token entropy (nats) is below this;
            ``inf`` takes it always.
    """

    def __init__(self, lr: float = 1e-3, entropy_threshold: float = float("inf")) -> None:
        if not lr > 0 or not entropy_threshold > 0:
            raise ValueError(f"need lr > 0 and entropy_threshold > 0, got {lr}, {entropy_threshold}")
        self.lr = float(lr)
        self.entropy_threshold = float(entropy_threshold)
        self.steps_taken = 0
        self.decisions = 0

    def decide(self, feedback: Feedback) -> bool:
        """``feedback["entropy"]``: the first half's mean token entropy -> whether to take the unlearning step."""
        if "entropy" not in feedback:
            raise KeyError(f"EEPO needs feedback['entropy']; got keys {sorted(feedback)}")
        self.decisions += 1
        take = float(feedback["entropy"]) < self.entropy_threshold
        self.steps_taken += int(take)
        return take

    def reset(self) -> None:
        self.steps_taken = 0
        self.decisions = 0

    def state_dict(self) -> dict[str, Any]:
        return {"steps_taken": self.steps_taken, "decisions": self.decisions}


@contextmanager
def perturbed(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    lr: float,
    pad_id: int,
    temperature: float = 1.0,
    suppress: Sequence[int] = (),
) -> Iterator[torch.nn.Module]:
    """Inside the block, ``model`` has taken one unlearning step on ``completions``; on exit it is restored exactly.

    Args:
        model: The policy; its parameters, buffers, ``.grad`` fields and train/eval mode are restored on exit.
        prompts: Prompt ids per row.
        completions: The sampled completions to unlearn (rows with no tokens are ignored).
        lr: Step size ``η``.
        pad_id: Padding id.
        temperature: Sampling temperature of the log-probabilities (as sampled).
        suppress: Ids the sampler never draws (same as the sampler's).

    Yields:
        ``model`` with the perturbed weights.
    """
    import torch

    from meta.rlvr.lm.sampling import sequence_logprobs

    snapshot = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=False).items()}
    grads = {name: None if p.grad is None else p.grad.detach().clone() for name, p in model.named_parameters()}
    was_training = model.training
    rows = [(p, c) for p, c in zip(prompts, completions, strict=True) if c]
    try:
        if rows:
            model.train()
            logp, mask = sequence_logprobs(
                model, [p for p, _ in rows], [c for _, c in rows], pad_id, temperature=temperature, suppress=suppress
            )
            likelihood = (logp * mask).sum() / mask.sum().clamp(min=1.0)
            params = [p for p in model.parameters() if p.requires_grad]
            step = torch.autograd.grad(likelihood, params, allow_unused=True)
            with torch.no_grad():
                for p, g in zip(params, step, strict=True):
                    if g is not None:
                        p.sub_(lr * g)  # descend the sampled responses' log-likelihood: "forget" them
        model.train(was_training)
        yield model
    finally:
        with torch.no_grad():
            model.load_state_dict(snapshot)
            for name, p in model.named_parameters():
                saved = grads[name]
                p.grad = None if saved is None else saved
        model.train(was_training)
