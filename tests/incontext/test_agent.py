"""Unit tests of the agent: KV cache, padding, critic isolation, multi-gamma targets, two-hot, Polyak targets."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from meta.incontext.agent import Batch, InContextAgent, multi_gamma_targets, n_step_targets
from meta.incontext.config import AgentConfig
from meta.incontext.sequence import SigmaReparamLinear
from meta.incontext.value_scale import bin_log_probs, expected_value, symexp, symlog, twohot

INPUT_DIM, N_ACTIONS = 7, 3


def _agent(**overrides: object) -> InContextAgent:
    return InContextAgent(INPUT_DIM, N_ACTIONS, AgentConfig(d_model=32, head_hidden=32, **overrides))  # type: ignore[arg-type]


def _batch(batch: int = 4, steps: int = 12, generator: torch.Generator | None = None) -> Batch:
    g = generator or torch.Generator().manual_seed(0)
    return Batch(
        obs=torch.randn(batch, steps + 1, INPUT_DIM, generator=g),
        actions=torch.randint(0, N_ACTIONS, (batch, steps), generator=g),
        rewards=torch.rand(batch, steps, generator=g),
        dones=torch.zeros(batch, steps),
        mask=torch.ones(batch, steps),
        start=torch.zeros(batch, dtype=torch.long),
    )


@pytest.mark.parametrize(
    ("encoder", "context_len", "sigma_reparam"),
    [("transformer", 64, False), ("transformer", 5, False), ("transformer", 64, True), ("gru", 64, False)],
)
def test_incremental_inference_equals_full_sequence(encoder: str, context_len: int, sigma_reparam: bool) -> None:
    agent = _agent(encoder=encoder, context_len=context_len, sigma_reparam=sigma_reparam).eval()
    obs = torch.randn(3, 20, INPUT_DIM)
    with torch.no_grad():
        full, _ = agent.encode(obs)
        full_logits = agent.policy_logits(full)[:, :, -1]
    state = agent.init_state(3)
    stepped = []
    for t in range(obs.shape[1]):
        logits, state = agent.act_logits(obs[:, t], state)
        stepped.append(logits)
    torch.testing.assert_close(torch.stack(stepped, dim=1), full_logits, atol=1e-5, rtol=1e-4)


def test_kv_cache_is_bounded_by_context() -> None:
    agent = _agent(context_len=5).eval()
    state = agent.init_state(2)
    for _ in range(12):
        _, state = agent.act_logits(torch.randn(2, INPUT_DIM), state)
    assert state.length == 12
    assert all(k.shape[2] == 4 for k in state.keys)


def test_window_offset_matches_the_same_steps_of_a_full_pass() -> None:
    """A window cut at step 8 (start=8) agrees with the full pass once the receptive field lies inside the window.

    With 2 layers and a context of 4, step t depends on steps t-6..t, so steps 14 and 15 must agree.
    """
    agent = _agent(context_len=4).eval()
    obs = torch.randn(1, 16, INPUT_DIM)
    with torch.no_grad():
        full, _ = agent.encode(obs)
        window, _ = agent.encode(obs[:, 8:], None, torch.tensor([8]))
    torch.testing.assert_close(window[:, 6:], full[:, 14:], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(window[:, 0], full[:, 8], atol=1e-3)


@pytest.mark.parametrize("sigma_reparam", [False, True])
def test_padded_steps_do_not_change_loss_or_gradients(sigma_reparam: bool) -> None:
    torch.manual_seed(0)
    agent = _agent(sigma_reparam=sigma_reparam)
    # A training pass refines the sigma-reparam power-iteration vectors; both passes must start from the same ones.
    start = {name: tensor.clone() for name, tensor in agent.state_dict().items()}
    batch = _batch()
    batch.mask[1, 7:] = 0.0
    batch.mask[3, 2:] = 0.0

    def loss_and_grads(b: Batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        agent.load_state_dict(start)
        agent.zero_grad()
        loss, _ = agent.loss(b, torch.Generator().manual_seed(1))
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in agent.optimized_parameters() if p.grad is not None]

    loss, grads = loss_and_grads(batch)
    garbage = _batch(generator=torch.Generator().manual_seed(99))
    scrambled = Batch(**{name: getattr(batch, name).clone() for name in Batch.__dataclass_fields__})
    pad = scrambled.mask == 0
    scrambled.actions[pad] = garbage.actions[pad]
    scrambled.rewards[pad] = garbage.rewards[pad] * 100.0
    scrambled.dones[pad] = 1.0
    # Observations after the last real next-state are padding too.
    scrambled.obs[1, 9:] = garbage.obs[1, 9:]
    scrambled.obs[3, 4:] = garbage.obs[3, 4:]
    loss2, grads2 = loss_and_grads(scrambled)
    torch.testing.assert_close(loss, loss2)
    for a, b in zip(grads, grads2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_actor_term_does_not_train_the_critics() -> None:
    agent = _agent(critic_coef=0.0, actor_coef=1.0, bc_coef=0.0)
    critic_before = [p.detach().clone() for p in agent.critics.parameters()]
    actor_before = [p.detach().clone() for p in agent.actor.parameters()]
    optimizer = torch.optim.AdamW(agent.optimized_parameters(), lr=1e-2, weight_decay=0.0)
    loss, _ = agent.loss(_batch())
    loss.backward()
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in agent.critics.parameters())
    assert any(p.grad is not None and torch.count_nonzero(p.grad) > 0 for p in agent.timestep_encoder.parameters())
    optimizer.step()
    for before, after in zip(critic_before, agent.critics.parameters(), strict=True):
        torch.testing.assert_close(before, after.detach(), rtol=0, atol=0)
    assert any(not torch.equal(b, a) for b, a in zip(actor_before, agent.actor.parameters(), strict=True))


def test_critic_term_trains_critics() -> None:
    agent = _agent(critic_coef=1.0, actor_coef=0.0, bc_coef=0.0)
    loss, _ = agent.loss(_batch())
    loss.backward()
    assert all(p.grad is not None and torch.count_nonzero(p.grad) > 0 for p in agent.critics.parameters())
    assert all(p.grad is None for p in agent.target_critics.parameters())


def test_multi_gamma_targets_by_hand() -> None:
    rewards = torch.tensor([[1.0, 0.5, 2.0]])
    dones = torch.tensor([[0.0, 0.0, 1.0]])
    next_values = torch.tensor([[[10.0, 20.0], [4.0, 8.0], [100.0, 100.0]]])
    gammas = torch.tensor([0.5, 0.9])
    expected = torch.tensor([[[1.0 + 5.0, 1.0 + 18.0], [0.5 + 2.0, 0.5 + 7.2], [2.0, 2.0]]])
    torch.testing.assert_close(multi_gamma_targets(rewards, dones, next_values, gammas), expected)


def test_n_step_targets_by_hand() -> None:
    """Two-step sums: cut at the task end (no bootstrap) and at the row's last real step (bootstrap there)."""
    gammas = torch.tensor([0.5, 1.0])
    rewards = torch.tensor([[1.0, 2.0, 4.0, 0.0], [1.0, 2.0, 4.0, 9.0]])
    dones = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])  # row 1 is cut after step 2 (not a task end)
    values = torch.tensor([10.0, 20.0, 30.0, 99.0])  # V(s[t + 1]), the same under both discounts
    next_values = values[None, :, None].expand(2, 4, 2)
    targets = n_step_targets(rewards, dones, mask, next_values, gammas, n_step=2)
    g = gammas
    ended = torch.stack([1 + 2 * g + g**2 * 20, 2 + 4 * g, 4 + 0 * g, 0 * g])  # row 0: the task ends at step 2
    cut = torch.stack([1 + 2 * g + g**2 * 20, 2 + 4 * g + g**2 * 30, 4 + g * 30, 0 * g])  # row 1 bootstraps at 2
    torch.testing.assert_close(targets, torch.stack([ended, cut]))
    # One step is the one-step target on the real steps.
    one = n_step_targets(rewards, dones, mask, next_values, gammas, n_step=1)
    torch.testing.assert_close(
        one * mask[..., None], multi_gamma_targets(rewards, dones, next_values, gammas) * mask[..., None]
    )
    # A sum longer than the row bootstraps from the row's last next state.
    long = n_step_targets(rewards[1:], dones[1:], mask[1:], next_values[1:], gammas, n_step=10)
    torch.testing.assert_close(long[0, 0], 1 + 2 * g + 4 * g**2 + g**3 * 30)


def test_agent_bootstraps_each_discount_from_its_own_head() -> None:
    """With zero rewards and a one-step window, each discount's target is gamma * its own next-state value."""
    agent = _agent(gammas=[0.5, 0.9], n_critics=2, critic_subset=2)
    bins, gammas = agent.bins, agent.gammas
    with torch.no_grad():
        for p in agent.target_critics.parameters():
            p.zero_()
        # Bias of the last target layer: every bin logit zero except one per discount.
        bias = torch.full((2, 2, N_ACTIONS, len(bins)), -30.0)
        level = {0: int(torch.argmin((bins - symlog(torch.tensor(4.0))).abs())), 1: len(bins) // 2 + 3}
        for g, b in level.items():
            bias[:, g, :, b] = 30.0
        agent.target_critics.b2.copy_(bias.reshape(2, -1))
    features = torch.randn(1, 1, agent.config.d_model)
    q = agent.q_values(features, agent.target_critics)
    torch.testing.assert_close(q[0, 0, 0, 0, 0], symexp(bins[level[0]]), atol=1e-4, rtol=1e-4)
    targets = multi_gamma_targets(torch.zeros(1, 1), torch.zeros(1, 1), q[:, :, 0, :, 0], gammas)
    torch.testing.assert_close(targets[0, 0], gammas * q[0, 0, 0, :, 0])


def test_twohot_round_trip_and_symlog() -> None:
    bins = torch.linspace(-6.0, 6.0, 33)
    values = torch.tensor([-3.3, 0.0, 0.1, 2.718, 5.99])
    encoded = twohot(values, bins)
    torch.testing.assert_close(encoded.sum(-1), torch.ones(5))
    torch.testing.assert_close((encoded * bins).sum(-1), values)
    torch.testing.assert_close(symexp(symlog(torch.tensor([-50.0, 0.0, 83.3]))), torch.tensor([-50.0, 0.0, 83.3]))
    logits = torch.log(twohot(symlog(torch.tensor([42.0])), bins) + 1e-12)
    torch.testing.assert_close(expected_value(logits, bins), torch.tensor([42.0]), atol=1e-3, rtol=1e-4)


def test_written_out_bin_softmaxes_equal_torch_ones_and_stay_finite_at_large_logits() -> None:
    g = torch.Generator().manual_seed(0)
    bins = torch.linspace(0.0, 5.0, 15)
    logits = torch.randn(6, 4, 15, generator=g) * 3.0
    logits[0, 0] += 1_000.0  # a shift that overflows a softmax without the max subtracted
    expected = symexp((torch.softmax(logits, dim=-1) * bins).sum(-1))
    torch.testing.assert_close(expected_value(logits, bins), expected)
    assert torch.isfinite(expected_value(logits, bins)).all()
    target = torch.softmax(torch.randn(6, 4, 15, generator=g), dim=-1)
    ours, theirs = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    (-(target * bin_log_probs(ours)).sum()).backward()
    (-(target * F.log_softmax(theirs, dim=-1)).sum()).backward()
    torch.testing.assert_close(bin_log_probs(logits), F.log_softmax(logits, dim=-1))
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_polyak_moves_only_target_heads_toward_online() -> None:
    agent = _agent(tau=0.25)
    with torch.no_grad():
        for p in agent.critics.parameters():
            p.add_(1.0)
    before = [p.clone() for p in agent.target_critics.parameters()]
    agent.update_targets()
    for b, t, o in zip(before, agent.target_critics.parameters(), agent.critics.parameters(), strict=True):
        torch.testing.assert_close(t, 0.75 * b + 0.25 * o)
    names = {name for name, _ in agent.named_parameters() if name.startswith("target_")}
    assert names and all(name.startswith("target_critics.") for name in names)
    assert not any(name.startswith("target_critics.") for name, _ in agent.named_parameters() if _ in
                   set(agent.optimized_parameters()))  # fmt: skip


def test_memory_free_encoder_ignores_the_past() -> None:
    agent = _agent(encoder="memory_free").eval()
    obs = torch.randn(1, 6, INPUT_DIM)
    changed = obs.clone()
    changed[:, :3] = torch.randn(1, 3, INPUT_DIM)
    with torch.no_grad():
        torch.testing.assert_close(agent.encode(obs)[0][:, 3:], agent.encode(changed)[0][:, 3:])


def test_sigma_reparam_linear_starts_as_its_plain_layer_and_tracks_the_spectral_norm() -> None:
    torch.manual_seed(0)
    layer = SigmaReparamLinear(16, 48)
    raw = layer.parametrizations.weight.original  # spectral_norm keeps the unnormalized weight here
    x = torch.randn(5, 16)
    plain = torch.nn.functional.linear(x, raw, layer.bias)
    torch.testing.assert_close(layer.eval()(x), plain, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(
        layer.gamma.detach(), torch.linalg.matrix_norm(raw.detach(), ord=2), rtol=5e-2, atol=1e-5
    )
    # gamma starts at spectral_norm's power-iteration estimate of sigma (within a few per cent of the exact value);
    # training-mode passes refine the estimate toward the exact spectral norm.
    layer.train()
    for _ in range(200):
        layer(x)
    norm = layer.parametrizations.weight[0]
    exact = torch.linalg.matrix_norm(raw.detach(), ord=2)
    torch.testing.assert_close(torch.vdot(norm._u, raw.detach() @ norm._v), exact, rtol=1e-3, atol=1e-6)
    # Scaling W does not change the layer's function: only gamma sets the spectral norm of the effective weight.
    before = layer.eval()(x)
    with torch.no_grad():
        raw.mul_(3.0)
    layer.train()(x)
    torch.testing.assert_close(layer.eval()(x), before, atol=1e-5, rtol=1e-4)


def test_sigma_reparam_loads_checkpoints_of_the_hand_written_version() -> None:
    """Issue 7's layer stored ``weight`` (raw), ``u``, ``v`` and ``gamma``; they are spectral_norm's tensors renamed."""
    torch.manual_seed(0)
    layer = SigmaReparamLinear(6, 4)
    norm = layer.parametrizations.weight[0]
    old = {
        "weight": 2.0 * layer.parametrizations.weight.original.detach(),
        "bias": layer.bias.detach(),
        "gamma": torch.tensor(1.5),
        "u": norm._u.clone(),
        "v": norm._v.clone(),
    }
    fresh = torch.nn.Sequential(SigmaReparamLinear(6, 4))
    fresh.load_state_dict({f"0.{k}": v for k, v in old.items()})
    loaded = fresh[0]
    torch.testing.assert_close(loaded.parametrizations.weight.original, old["weight"])
    torch.testing.assert_close(loaded.parametrizations.weight[0]._u, old["u"])
    x = torch.randn(3, 6)
    expected = torch.nn.functional.linear(x, 1.5 * old["weight"] / torch.vdot(old["u"], old["weight"] @ old["v"]))
    torch.testing.assert_close(loaded.eval()(x), expected + old["bias"], atol=1e-5, rtol=1e-4)


def test_sigma_reparam_agent_trains_gamma() -> None:
    agent = _agent(sigma_reparam=True).train()
    loss, _ = agent.loss(_batch())
    loss.backward()
    gammas = [m.gamma for m in agent.modules() if isinstance(m, SigmaReparamLinear)]
    assert len(gammas) == 2 * 4  # qkv, out and two feed-forward layers per block, 2 blocks
    assert all(g.grad is not None and torch.isfinite(g.grad) for g in gammas)


def _manual_max_target_loss(agent: InContextAgent, batch: Batch, n_step: int = 1) -> torch.Tensor:
    """The scalar critic's Huber loss against ``sum_{k<n} gamma^k r[t+k] + gamma^n max_a Q_target(s[t+n], a)``
    (cut at a task end or the row's end), written out step by step (one critic, so the random subset and its minimum
    are the critic itself; every step of the batch is real)."""
    features, _ = agent.encode(batch.obs, None, batch.start)
    q_now = agent.q_values(features[:, :-1])[:, :, 0]  # (B, T, G, A)
    taken = q_now.gather(-1, batch.actions[:, :, None, None].expand(-1, -1, agent.n_gammas, 1)).squeeze(-1)
    with torch.no_grad():
        best_next = agent.q_values(features[:, 1:], agent.target_critics)[:, :, 0].max(-1).values  # (B, T, G)
        targets = torch.zeros_like(best_next)
        rows, steps = batch.rewards.shape
        for b in range(rows):
            for t in range(steps):
                for g, gamma in enumerate(agent.gammas.tolist()):
                    total, discount, u = 0.0, 1.0, t
                    while True:
                        total += discount * float(batch.rewards[b, u])
                        discount *= gamma
                        if batch.dones[b, u] > 0:
                            break
                        if u == t + n_step - 1 or u == steps - 1:
                            total += discount * float(best_next[b, u, g])
                            break
                        u += 1
                    targets[b, t, g] = total
    return F.huber_loss(taken, targets, reduction="none").mean(-1).mean()


def test_scalar_critic_with_max_target_is_q_learning_by_hand() -> None:
    agent = _agent(
        critic_head="scalar", critic_target="max", policy="critic", n_critics=1, critic_subset=1, sigma_reparam=False
    )
    with torch.no_grad():  # targets away from the online heads, so the max differs from any one action's value
        for p in agent.target_critics.parameters():
            p.add_(0.3 * torch.randn_like(p))
    batch = _batch()
    batch.dones[:, -1] = 1.0
    batch.dones[0, 4] = 1.0  # a task end inside a row: no sum runs past it
    loss, info = agent.loss(batch)
    torch.testing.assert_close(loss, _manual_max_target_loss(agent, batch))
    for n_step in (3, 20):  # 20 is longer than the rows
        agent.config.n_step = n_step
        torch.testing.assert_close(agent.loss(batch)[0], _manual_max_target_loss(agent, batch, n_step))
        assert not torch.allclose(agent.loss(batch)[0], loss)
    assert set(info) == {"train/critic_loss", "train/q_mean"}
    assert agent.q_values(torch.randn(2, agent.config.d_model)).shape == (2, 1, agent.n_gammas, N_ACTIONS)


def test_critic_policy_is_a_boltzmann_policy_of_the_mean_q_and_trains_no_actor() -> None:
    agent = _agent(critic_head="scalar", critic_target="max", policy="critic", entropy_coef=0.05, reward_scale=2.0)
    features = torch.randn(5, agent.config.d_model)
    expected = agent.q_values(features).mean(dim=-3) / (2.0 * 0.05)
    torch.testing.assert_close(agent.policy_logits(features), expected)
    loss, _ = agent.loss(_batch())
    loss.backward()
    assert all(p.grad is None for p in agent.actor.parameters())
    assert all(p.grad is not None for p in agent.critics.parameters())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"policy": "critic"}, "critic_target='max'"),
        ({"policy": "critic", "critic_target": "max", "entropy_coef": 0.0}, "entropy_coef > 0"),
        ({"critic_head": "scalar", "critic_init": "lowest"}, "two-hot"),
        ({"critic_head": "bins"}, "unknown critic_head"),
        ({"n_step": 0}, "n_step must be >= 1"),
    ],
)
def test_inconsistent_critic_settings_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _agent(**overrides)


def test_max_target_values_the_best_next_action_not_the_actors() -> None:
    """With the actor's policy and the max target on the same weights, only the max target changes with a target
    head that favours an action the actor does not take."""
    torch.manual_seed(0)
    policy_target = _agent(critic_head="scalar", n_critics=1, critic_subset=1, sigma_reparam=False)
    max_target = _agent(critic_head="scalar", critic_target="max", n_critics=1, critic_subset=1, sigma_reparam=False)
    max_target.load_state_dict(policy_target.state_dict())
    batch = _batch()
    torch.testing.assert_close(
        max_target.loss(batch)[1]["train/critic_loss"], _manual_max_target_loss(max_target, batch).item()
    )
    assert policy_target.loss(batch)[1]["train/critic_loss"] != max_target.loss(batch)[1]["train/critic_loss"]
