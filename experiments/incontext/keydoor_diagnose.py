"""Why does the agent's greedy play on the dark key-door stay below random? One short run, looked at five ways.

Trains one setting (``matched_protocol.SETTINGS``) on a gate task (default ``keydoor_5x5``) for a small budget and
records, besides the run itself:

* ``epsilons``: the epsilon each actor actually used in every collection (its mean over the trial's steps, and at
  the trial's first and last step), read from the schedule the collection called;
* ``updates``: the loss parts along the run (policy entropy, Q mean, critic loss, gradient norm) per collection;
* ``value_check``: the critic's Q-values against Monte-Carlo returns of the same replayed trials, both in the env's
  reward units (``value_check.value_check``);
* ``behaviour``: how the greedy policy, the sampled policy, random and the memory-only explorer play the same
  evaluation tasks: action histogram, share of steps into a wall, distinct cells per inner episode, share of inner
  episodes that pick up the key and that reach the door, mean return;
* ``q_greedy``: the same evaluation tasks played by the critic alone, acting by ``argmax_a Q(s, a)`` (the ensemble's
  mean) under each discount, beside the actor's greedy play: if argmax-Q plays well and the actor does not, the actor
  loss fails to follow the critic; if argmax-Q plays badly too, the critic ranks actions wrongly whatever its scale.
  ``actor_agrees_with_q`` is the share of the actor's greedy steps whose action is also argmax-Q of the acting
  discount, and ``q_action_spread`` the mean over those steps of ``max_a Q - min_a Q`` (env reward units) beside the
  spread of one action's Q across states, which tells a state-dependent ranking from a per-action offset;
* ``memory_use``: on random play, the steps whose next target (key, or door when holding the key) an earlier step
  of the trial revealed: the share where the actor's, and the critic's, greedy action moves toward it, beside chance;
* ``acting_matches_training``: the policy logits of the greedy evaluation's own trajectories recomputed by the
  training pass (one whole-trial forward from step 0, as the loss sees them) against those the agent acted with one
  step at a time through its cache: the same inputs (previous action and reward, reset flag, time in the trial), the
  same history, so the largest difference should be float noise.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/keydoor_diagnose.py --env-steps 4800 \\
        --out experiments/incontext/results/keydoor_diagnose/amago_keydoor_4800_seed0.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.metarl.keydoor import MOVES
from experiments.incontext.gate import parse_overrides
from experiments.incontext.matched_protocol import GATE_TASKS, SETTINGS, agent_config
from experiments.incontext.value_check import value_check
from meta.incontext.agent import InContextAgent
from meta.incontext.references import KeyDoorExplorer
from meta.incontext.replay import Trajectory
from meta.incontext.tasks import eval_task_seeds, task_env_fns
from meta.incontext.trainer import InContextTrainer, run_rollouts, task_kwargs
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads


@dataclass
class Args:
    setting: str = "amago_keydoor"
    """Agent setting (matched_protocol.SETTINGS)."""
    task: str = "keydoor_5x5"
    """Gate task (matched_protocol.GATE_TASKS)."""
    seed: int = 0
    """Training seed."""
    env_steps: int = 4800
    """Env-step budget (the setting's schedules are planned over it)."""
    eval_tasks: int = 50
    """Evaluation tasks of the behaviour statistics (the first of the shared evaluation seeds)."""
    batch_size: int | None = None
    """Trials per update (``None``: the setting's); fewer make a diagnosis affordable on a starved CPU."""
    value_trials: int = 16
    """Replayed trials of the value check."""
    run_dir: str | None = None
    """Checkpoint folder (a killed run resumes); ``None``: in memory only."""
    out: str | None = None
    """Where the JSON goes (default: printed only)."""
    replay_only_updates: int = 0
    """After the run: this many more updates on its replay alone (no new data, the peak learning rate), probing
    ``memory_use`` on the online weights every ``probe_every`` updates: does more training on the same data teach
    the critic to head for remembered targets (then updates are the bottleneck), or not (then data or the model)?"""
    probe_every: int = 1000
    """Updates between two probes of ``replay_only_updates``."""
    train_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the setting's TrainConfig (YAML values), as in ``keydoor_gate.py``."""
    agent_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the setting's AgentConfig (YAML values), e.g. ``value_mean=real``."""


def behaviour(trajectories: list[Trajectory], size: int) -> dict[str, Any]:
    """How a policy played key-door trials, from its RL^2 trajectories (input layout ``[x, y, has_key, one-hot
    previous action (4), previous reward, reset flag, (time)]``, positions scaled by ``size - 1``).

    A step "into a wall" leaves the agent on its cell without an inner-episode reset; an inner episode "picks the key"
    when a reward arrives while not holding it and "reaches the door" when one arrives while holding it.
    """
    actions = np.concatenate([t.actions for t in trajectories])
    walls = keys = doors = episodes = 0
    cells_per_episode: list[int] = []
    for traj in trajectories:
        pos = np.rint(traj.obs[:, :2] * (size - 1)).astype(int)
        holding = traj.obs[:, 2] > 0.5
        reset = traj.obs[:, 8] > 0.5
        visited = {tuple(pos[0])}
        episodes += 1
        for t in range(len(traj)):
            if traj.rewards[t] > 0:
                keys += int(not holding[t])
                doors += int(holding[t])
            if reset[t + 1]:
                cells_per_episode.append(len(visited))
                visited = {tuple(pos[t + 1])}
                episodes += int(t + 1 < len(traj))
            else:
                walls += int((pos[t + 1] == pos[t]).all())
                visited.add(tuple(pos[t + 1]))
        cells_per_episode.append(len(visited))
    return {
        "return_mean": float(np.mean([t.rewards.sum() for t in trajectories])),
        "action_shares": (np.bincount(actions, minlength=4) / len(actions)).tolist(),
        "wall_step_share": walls / len(actions),
        "distinct_cells_per_episode": float(np.mean(cells_per_episode)),
        "inner_episodes": episodes,
        "key_episode_share": keys / episodes,
        "door_episode_share": doors / episodes,
    }


def play(
    policy: Callable[[gym.Env, np.ndarray], int], cfg: Any, seeds: list[int], explorer: KeyDoorExplorer | None = None
) -> list[Trajectory]:
    """Trajectories of a reference ``policy(raw_env, obs) -> action`` on the tasks ``seeds`` (RL^2 inputs recorded)."""
    env = task_env_fns(cfg.task, 1, **task_kwargs(cfg))[0]()
    raw = env.unwrapped
    out = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        if explorer is not None:
            explorer.reset(raw.pos)  # type: ignore[attr-defined]
        rec: dict[str, list[Any]] = {"obs": [obs], "actions": [], "rewards": [], "dones": []}
        done = False
        while not done:
            pos, holding = raw.pos.copy(), raw.has_key  # type: ignore[attr-defined]
            action = policy(raw, obs)
            entered = np.clip(pos + MOVES[action], 0, raw.size - 1)  # type: ignore[attr-defined]
            obs, reward, done, _, _ = env.step(action)
            if explorer is not None:
                explorer.observe(entered, float(reward), holding)
            for key, value in (("obs", obs), ("actions", action), ("rewards", reward), ("dones", float(done))):
                rec[key].append(value)
        out.append(Trajectory(*(np.asarray(rec[k], dtype=d) for k, d in (
            ("obs", np.float32), ("actions", np.int64), ("rewards", np.float32), ("dones", np.float32)))))  # fmt: skip
    env.close()
    return out


def mean_return(trajectories: list[Trajectory]) -> float:
    """Mean total reward per trial."""
    return float(np.mean([t.rewards.sum() for t in trajectories]))


class QGreedyActor:
    """An agent seen through its critics: the "policy logits" of a step are the ensemble-mean Q-values of discount
    ``gamma_index``, so :func:`~meta.incontext.trainer.run_rollouts`'s greedy play is ``argmax_a Q(s, a)``.

    Args:
        agent: The trained agent.
        gamma_index: Which discount's critic acts (an index into ``agent.config.gammas``).
    """

    def __init__(self, agent: InContextAgent, gamma_index: int) -> None:
        self.agent = agent
        self.gamma_index = gamma_index

    @property
    def device(self) -> torch.device:
        """The agent's device."""
        return self.agent.device

    def eval(self) -> QGreedyActor:
        """Put the agent in eval mode."""
        self.agent.eval()
        return self

    def init_state(self, batch: int) -> Any:
        """The agent's fresh encoder state."""
        return self.agent.init_state(batch)

    @torch.no_grad()
    def act_logits(self, obs: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """Ensemble-mean Q-values ``(B, A)`` of the acting discount for inputs ``(B, D)`` (critic units), new state."""
        features, state = self.agent.encode(obs[:, None, :], state)
        return self.agent.q_values(features[:, 0]).mean(dim=-3)[:, self.gamma_index], state


def actor_against_critic(agent: InContextAgent, trajectories: list[Trajectory]) -> dict[str, Any]:
    """On the steps of ``trajectories`` (one whole-trial pass each), how the actor's greedy action relates to the
    critic's ranking under the acting (last) discount.

    Returns:
        ``actor_agrees_with_q``: share of steps whose actor argmax is the argmax of the ensemble-mean Q;
        ``q_action_spread``: mean over steps of ``max_a Q - min_a Q`` (env reward units);
        ``q_state_spread``: mean over actions of the standard deviation of ``Q(., a)`` across steps (env units);
        ``q_argmax_shares``: how often each action is the critic's argmax;
        ``q_offset_per_action``: each action's mean ``Q(s, a) - mean_b Q(s, b)`` over steps (env units), the part of
        the ranking that does not depend on the state.
    """
    agent.eval()
    obs = torch.as_tensor(np.stack([t.obs for t in trajectories]), device=agent.device)
    with torch.no_grad():
        features, _ = agent.encode(obs, None, torch.zeros(len(trajectories), dtype=torch.long, device=agent.device))
        logits = agent.policy_logits(features[:, :-1])[..., -1, :].reshape(-1, agent.n_actions)
        q = agent.q_values(features[:, :-1]).mean(dim=-3)[..., -1, :].reshape(-1, agent.n_actions)
    q = q / agent.config.reward_scale
    q_best = q.argmax(-1)
    centred = q - q.mean(-1, keepdim=True)
    return {
        "actor_agrees_with_q": float((logits.argmax(-1) == q_best).float().mean()),
        "q_action_spread": float((q.max(-1).values - q.min(-1).values).mean()),
        "q_state_spread": float(q.std(0).mean()),
        "q_argmax_shares": (torch.bincount(q_best, minlength=agent.n_actions) / len(q_best)).tolist(),
        "q_offset_per_action": centred.mean(0).tolist(),
    }


def remembered_targets(traj: Trajectory, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every step of one key-door trial: the agent's cell ``(T, 2)`` and the cell it must reach next, when an
    earlier step of the trial has revealed it (``(T, 2)``, valid where the mask ``(T,)`` is true).

    The target is the key while the agent does not hold it and the door while it does; a cell is revealed by a reward
    on entering it (the cell entered is the step's cell plus its move: a door ends the inner episode, so the next
    input already shows the start cell). Steps already on the target are left out.
    """
    pos = np.rint(traj.obs[:-1, :2] * (size - 1)).astype(int)
    holding = traj.obs[:-1, 2] > 0.5
    key: np.ndarray | None = None
    door: np.ndarray | None = None
    targets = np.zeros_like(pos)
    known = np.zeros(len(traj), dtype=bool)
    for t in range(len(traj)):
        target = door if holding[t] else key
        if target is not None and not (pos[t] == target).all():
            targets[t], known[t] = target, True
        if traj.rewards[t] > 0:
            entered = np.clip(pos[t] + MOVES[int(traj.actions[t])], 0, size - 1)
            if holding[t]:
                door = entered
            else:
                key = entered
    return pos, targets, known


def memory_use(agent: InContextAgent, trajectories: list[Trajectory], size: int) -> dict[str, float]:
    """Does the agent use what the trial has shown? On the steps of ``trajectories`` whose next target (key, or door
    when holding the key) was revealed earlier in the trial, the share whose greedy action (the actor's, and the
    critic's argmax-Q, acting discount) moves closer to it, beside chance (the mean share of actions that do).

    A policy that remembers goes toward the target (share near 1); one that ignores its history scores chance.
    """
    agent.eval()
    obs = torch.as_tensor(np.stack([t.obs for t in trajectories]), device=agent.device)
    with torch.no_grad():
        features, _ = agent.encode(obs, None, torch.zeros(len(trajectories), dtype=torch.long, device=agent.device))
        actor = agent.policy_logits(features[:, :-1])[..., -1, :].argmax(-1).cpu().numpy()  # (B, T)
        critic = agent.q_values(features[:, :-1]).mean(dim=-3)[..., -1, :].argmax(-1).cpu().numpy()
    toward_actor: list[bool] = []
    toward_critic: list[bool] = []
    chance: list[float] = []
    for row, traj in enumerate(trajectories):
        pos, targets, known = remembered_targets(traj, size)
        for t in np.flatnonzero(known):
            before = np.abs(pos[t] - targets[t]).sum()
            after = np.abs(np.clip(pos[t] + MOVES, 0, size - 1) - targets[t]).sum(-1)  # (A,) per action
            closer = after < before
            toward_actor.append(bool(closer[actor[row, t]]))
            toward_critic.append(bool(closer[critic[row, t]]))
            chance.append(float(closer.mean()))
    if not chance:
        return {"steps": 0, "actor_toward": float("nan"), "critic_toward": float("nan"), "chance": float("nan")}
    return {
        "steps": len(chance),
        "actor_toward": float(np.mean(toward_actor)),
        "critic_toward": float(np.mean(toward_critic)),
        "chance": float(np.mean(chance)),
    }


def played_toward_targets(trajectories: list[Trajectory], size: int) -> dict[str, float]:
    """How trials were played once a target was known: on the steps whose next target an earlier step revealed
    (:func:`remembered_targets`), the share whose *taken* action moved closer to it, apart for the key (not holding
    it) and the door (holding it); and the share of trials that found the key, and the door, at all.

    The door is revealed only by entering it with the key, and entering it sends the agent back to the start: its
    cell is the cell before plus the move, in no single input. A policy that remembers the key but not the door heads
    for the key on nearly every step and wanders with it.
    """
    toward: dict[bool, list[bool]] = {False: [], True: []}
    key_found = door_found = 0
    for traj in trajectories:
        pos, targets, known = remembered_targets(traj, size)
        holding = traj.obs[:-1, 2] > 0.5
        rewarded = traj.rewards > 0
        key_found += int((rewarded & ~holding).any())
        door_found += int((rewarded & holding).any())
        for t in np.flatnonzero(known):
            entered = np.clip(pos[t] + MOVES[int(traj.actions[t])], 0, size - 1)
            toward[bool(holding[t])].append(
                bool(np.abs(entered - targets[t]).sum() < np.abs(pos[t] - targets[t]).sum())
            )
    n = max(len(trajectories), 1)
    return {
        "key_steps": len(toward[False]),
        "toward_key": float(np.mean(toward[False])) if toward[False] else float("nan"),
        "door_steps": len(toward[True]),
        "toward_door": float(np.mean(toward[True])) if toward[True] else float("nan"),
        "trials_key_found": key_found / n,
        "trials_door_found": door_found / n,
    }


def critic_probe(agent: InContextAgent, cfg: Any, n_tasks: int) -> dict[str, Any]:
    """Cheap signs that learning has started, on the first ``n_tasks`` evaluation tasks: the mean return of the
    critic's own greedy play (argmax of the ensemble-mean Q, acting discount), how that play heads for a key or door
    it has found (:func:`played_toward_targets`), and :func:`memory_use` on random play.

    Args:
        agent: The weights to probe (the run's evaluated ones).
        cfg: The run's TrainConfig (a key-door task).
        n_tasks: Evaluation tasks (seeds from the shared evaluation base).
    """
    seeds = eval_task_seeds(n_tasks)
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, n_tasks, **task_kwargs(cfg)))
    try:
        critic_view = QGreedyActor(agent, len(cfg.agent.gammas) - 1)
        q_greedy = run_rollouts(critic_view, venv, seeds, None, np.random.default_rng(0))  # type: ignore[arg-type]
    finally:
        venv.close()
    policy_rng = np.random.default_rng(0)
    random_play = play(lambda raw, obs: int(policy_rng.integers(0, 4)), cfg, seeds)
    return {
        "n_tasks": n_tasks,
        "q_greedy": mean_return(q_greedy),
        "q_greedy_targets": played_toward_targets(q_greedy, cfg.keydoor_size),
        "memory_use": memory_use(agent, random_play, cfg.keydoor_size),
    }


def acting_gap(agent: InContextAgent, trajectories: list[Trajectory]) -> float:
    """Largest absolute difference between the acting logits (one step at a time, cache) and the training pass's
    logits (one forward over the whole trial from step 0) on the same trajectories, last discount."""
    agent.eval()
    obs = torch.as_tensor(np.stack([t.obs for t in trajectories]), device=agent.device)
    with torch.no_grad():
        features, _ = agent.encode(obs, None, torch.zeros(len(trajectories), dtype=torch.long, device=agent.device))
        whole = agent.policy_logits(features)[:, :-1, -1]
        state = agent.init_state(len(trajectories))
        stepwise = []
        for t in range(obs.shape[1] - 1):
            logits, state = agent.act_logits(obs[:, t], state)
            stepwise.append(logits)
    return float((whole - torch.stack(stepwise, 1)).abs().max())


def main(args: Args) -> dict[str, Any]:
    set_torch_threads(1)
    if args.setting not in SETTINGS or args.task not in GATE_TASKS:
        raise SystemExit(f"need a setting in {list(SETTINGS)} and a task in {list(GATE_TASKS)}")
    cfg = agent_config(args.setting, args.task, args.seed, args.env_steps, None, args.eval_tasks)
    agent_cfg = dataclasses.replace(cfg.agent, **parse_overrides(args.agent_override))
    cfg = dataclasses.replace(cfg, agent=agent_cfg, **parse_overrides(args.train_override))
    cfg = dataclasses.replace(cfg, eval_every_steps=args.env_steps + 1, batch_size=args.batch_size or cfg.batch_size)
    trainer = InContextTrainer(cfg, None if args.run_dir is None else Path(args.run_dir))
    eps_log: list[dict[str, Any]] = []
    update_log: list[dict[str, float]] = []
    plain_epsilons, plain_update = trainer.trial_epsilons, trainer.update

    def recorded_epsilons() -> Any:
        schedule = plain_epsilons()
        steps = trainer.trial_length
        table = np.stack([schedule(t) if callable(schedule) else schedule for t in range(steps)])  # (T, n_envs)
        eps_log.append({"env_steps": trainer.env_steps, "mean": table.mean(0).tolist(),
                        "first_step": table[0].tolist(), "last_step": table[-1].tolist()})  # fmt: skip
        return schedule

    def recorded_update(n: int) -> dict[str, float]:
        info = plain_update(n)
        if info:
            update_log.append({"env_steps": trainer.env_steps, "updates": trainer.updates, **info})
        return info

    trainer.trial_epsilons = recorded_epsilons  # type: ignore[method-assign]
    trainer.update = recorded_update  # type: ignore[method-assign,assignment]
    result = trainer.learn()
    seeds = eval_task_seeds(args.eval_tasks)
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, len(seeds), **task_kwargs(cfg)))
    rng = np.random.default_rng(0)
    played: dict[str, list[Trajectory]] = {}
    for name, agent in (("online", trainer.agent), ("eval_weights", trainer.eval_agent)):
        played[f"{name}_greedy"] = run_rollouts(agent, venv, seeds, None, rng)
        played[f"{name}_sampled"] = run_rollouts(
            agent, venv, seeds, np.zeros(len(seeds)), rng, torch.Generator().manual_seed(0)
        )
    for index, gamma in enumerate(cfg.agent.gammas):
        critic_view = QGreedyActor(trainer.eval_agent, index)
        played[f"q_greedy_gamma{gamma}"] = run_rollouts(critic_view, venv, seeds, None, rng)  # type: ignore[arg-type]
    venv.close()
    policy_rng = np.random.default_rng(0)
    played["random"] = play(lambda raw, obs: int(policy_rng.integers(0, 4)), cfg, seeds)
    explorer = KeyDoorExplorer(cfg.keydoor_size)
    played["explorer"] = play(lambda raw, obs: explorer.act(raw.pos, raw.has_key), cfg, seeds, explorer)  # type: ignore[attr-defined]
    out = {
        "setting": args.setting,
        "task": args.task,
        "seed": args.seed,
        "env_steps": trainer.env_steps,
        "updates": trainer.updates,
        "final_eval_greedy": result["eval"]["mean"],
        "epsilons": eps_log,
        "updates_log": update_log,
        "value_check": value_check(trainer, args.value_trials, np.random.default_rng(args.seed)),
        "behaviour": {name: behaviour(trajs, cfg.keydoor_size) for name, trajs in played.items()},
        # Mean return of the actor's greedy play and of argmax-Q under each discount, on the same tasks.
        "q_greedy": {
            "actor_greedy": mean_return(played["eval_weights_greedy"]),
            **{f"gamma{g}": mean_return(played[f"q_greedy_gamma{g}"]) for g in cfg.agent.gammas},
        },
        "actor_against_critic": {
            "actor_greedy_steps": actor_against_critic(trainer.eval_agent, played["eval_weights_greedy"]),
            "random_steps": actor_against_critic(trainer.eval_agent, played["random"]),
        },
        # On random play (many revealed keys and doors): does the actor or the critic head for them?
        "memory_use": memory_use(trainer.eval_agent, played["random"], cfg.keydoor_size),
        "acting_matches_training": {
            name: acting_gap(agent, played[f"{name}_greedy"])
            for name, agent in (("online", trainer.agent), ("eval_weights", trainer.eval_agent))
        },
        "config": dataclasses.asdict(cfg),
    }
    # Every number above is of the run as it ended; the probe below trains on and is recorded apart.
    replay_only: list[dict[str, Any]] = []
    if args.replay_only_updates > 0:
        # A constant peak rate from here on: the run's own cosine has ended at its floor.
        trainer.config = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, lr_final_fraction=1.0))
        probe = memory_use(trainer.agent, played["random"], cfg.keydoor_size)
        replay_only.append({"extra_updates": 0, **probe})
        for done in range(args.probe_every, args.replay_only_updates + 1, args.probe_every):
            info = plain_update(args.probe_every)
            probe = memory_use(trainer.agent, played["random"], cfg.keydoor_size)
            replay_only.append({"extra_updates": done, "critic_loss": info["train/critic_loss"], **probe})
            print(json.dumps(replay_only[-1]), flush=True)
    out["replay_only"] = replay_only
    if args.out is not None:
        atomic_write_json(Path(args.out), out)
    shown = (
        "final_eval_greedy",
        "q_greedy",
        "actor_against_critic",
        "memory_use",
        "behaviour",
        "acting_matches_training",
    )
    print(json.dumps({k: out[k] for k in shown}, indent=1))
    return out


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
