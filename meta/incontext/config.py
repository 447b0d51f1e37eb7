"""Typed configurations of the in-context agent and its training run (YAML presets in ``experiments/incontext/``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class AgentConfig:
    """Network and loss of :class:`~meta.incontext.agent.InContextAgent`.

    Attributes:
        encoder: Trajectory encoder: ``transformer`` (default), ``gru`` or ``memory_free``.
        d_model: Width of the timestep embedding and of the sequence model.
        n_layers: Transformer blocks.
        n_heads: Attention heads.
        context_len: Timesteps one query may attend to (itself included); also the KV-cache length when acting.
        dropout: Dropout inside the Transformer blocks.
        sigma_reparam: Spectrally reparametrized linear layers in the Transformer blocks (AMAGO's guard against
            attention entropy collapse; see :class:`~meta.incontext.sequence.SigmaReparamLinear`). On by default:
            without it 2 of 3 T-maze runs at L = 50 collapsed (``docs/incontext.md``). Configs saved before the
            field existed describe plain layers; :func:`with_saved_defaults` reads them as ``False``.
        head_hidden: Hidden width of the actor and critic heads.
        n_critics: Critics in the ensemble.
        critic_subset: Critics drawn at random per update whose minimum forms the TD target (REDQ-style).
        gammas: Discounts learned at once; the agent acts with the last (AMAGO's multi-gamma).
        critic_head: What a critic predicts: ``twohot`` (a categorical distribution over ``n_bins`` bins trained by
            cross-entropy against two-hot targets; DreamerV3) or ``scalar`` (one number per action and discount
            trained by the Huber loss against the TD target, as DQN and AMAGO's PopArt critic). On one fixed 5x5
            key-door layout, offline from random play, the scalar critic's greedy policy reached the optimum within
            500 updates while the two-hot critic of the key-door settings had not separated the actions after
            3,000 (``experiments/incontext/results/keydoor_fixed_layout.json``): the gaps between actions are small
            beside the values, and a cross-entropy over bins a factor of 2 apart in real units resolves them slowly.
        critic_target: How the TD target values the next state: ``policy`` (``sum_a pi(a|s') Q'(s', a)``, the
            actor's policy: AMAGO's) or ``max`` (``max_a Q'(s', a)``, Q-learning: the critics learn the greedy
            policy's values whatever the actor does, so an actor that settled early on a poor action does not keep
            the critics valuing it).
        n_step: Steps of reward summed before the TD target bootstraps (``n_step`` = 1: one-step TD). Longer sums carry
            a reward back ``n_step`` positions per update instead of one, so the value of a search that pays off many
            steps later reaches its first steps in fewer updates. The sum is not corrected for the behaviour policy
            (as in Ape-X and R2D2, whose ``n`` is 3-5): it values the acting policy's next ``n_step - 1`` moves,
            which is close to the greedy one's when acting is close to greedy. The sum stops at a task end (no
            bootstrap) and at the end of the replayed window or trajectory (bootstrapping there).
        policy: What the agent acts with: ``actor`` (the actor head, trained by the actor and filtered-BC terms) or
            ``critic`` (no actor: ``softmax(Q / entropy_coef)`` over the ensemble-mean Q of the last discount, the
            Boltzmann policy that the actor term's entropy bonus aims for, so greedy play is argmax-Q; DQN-style,
            with the epsilon schedules as its exploration). Needs ``critic_target="max"`` and ``entropy_coef > 0``.
            On one fixed 5x5 key-door layout, offline, the actor of the key-door settings stayed at a fifth of the
            optimum after 3,000 updates while argmax-Q of the same (scalar, Q-learning) critics was optimal after
            500: the exact expectation gradient of a near one-hot softmax hardly moves it toward a better action.
        n_bins: Bins of the two-hot critic (unused by the scalar critic).
        bin_range: Bins span ``[-bin_range, bin_range]`` in symlog units (upper end ``bin_range`` when ``bin_low`` is
            set).
        bin_low: Lower end of the bins in symlog units; ``None``: ``-bin_range``. A critic sized to the task's return
            range (:func:`~meta.incontext.tasks.critic_bins`) puts every bin where returns can fall, so fewer bins
            (cheaper heads: they dominate an update) keep the same resolution.
        critic_coef: Weight of the critic TD loss.
        actor_coef: Weight of the actor term (expected advantage under the policy, critics frozen).
        bc_coef: Weight of filtered behaviour cloning (replayed actions with positive advantage).
        entropy_coef: Entropy bonus inside the actor term (reward units per nat).
        lr: AdamW learning rate (the peak, when scheduled).
        lr_warmup_updates: Updates of linear warm-up from 0 to ``lr`` (AMAGO: 500); 0 = none.
        lr_final_fraction: After warm-up the rate follows a cosine from ``lr`` to ``lr_final_fraction * lr`` over the
            run's planned updates (``total_env_steps * updates_per_step``); 1.0 keeps it constant.
        weight_decay: AdamW weight decay.
        grad_clip: Global gradient-norm clip.
        tau: Polyak rate of the target critic heads per update (AMAGO: 0.003).
        reward_scale: Multiplier of the rewards in the critic's TD targets (AMAGO's ``reward_multiplier``; its dark
            key-door example uses 100): the critics' Q-values are in scaled units, where the two-hot bins resolve
            small returns better. It is a numerical knob of the critic only: the actor term divides the advantages
            by it (env reward units, so ``entropy_coef`` keeps its meaning and the actor's weight beside the critic
            in the shared sequence model does not change; AMAGO gets the same from PopArt), and the RL^2 inputs and
            every reported return keep the env's own rewards. Size the critic's bins for the scaled returns
            (:func:`~meta.incontext.tasks.critic_bins` takes the scale).
        value_mean: How a critic's bin distribution maps to a value: ``symlog`` (the two-hot target split in symlog
            units, the value ``symexp`` of the mean bin: a geometric-like mean that reads a sparse, mostly-zero target
            far below its mean) or ``real`` (DreamerV3: split and averaged over the bins' real values, so the value is
            the target distribution's mean; :mod:`~meta.incontext.value_scale`).
        critic_init: The critics' bin distribution before training: ``uniform`` (a small last layer) or ``lowest``
            (``p_i`` proportional to ``exp(-2 (b_i - b_0))`` over the symlog bin centres ``b_i``, so the critics start
            near the lowest value). With ``value_mean="real"`` and bins from 0 up, a uniform start reads as the bins'
            real mean (about 20 env reward units on the 5x5 key-door at the x100 scale, against returns below 1),
            which bootstrapping at gamma 0.999 takes thousands of updates to unwind.
        advantage_norm: Divide the actor's advantages by their root mean square per discount over the batch (floored
            at 1e-3 env reward units), as RecurrentPPO normalizes its advantages per batch and AMAGO's actor reads Q
            through PopArt: on a sparse task the Q differences between actions of a near-random policy are far below
            ``entropy_coef``, and unnormalized they cannot move the policy off uniform. Off: env reward units.
        actor_loss: What the actor term maximizes: ``advantage`` (``sum_a pi(a|s) A(s, a)`` with ``A`` from the ensemble
            mean, env reward units) or ``amago`` (AMAGO's discrete online loss: ``sum_a pi(a|s) min_k Q_k(s, a)``, the
            minimum over all critics, divided by the standard deviation of the batch's TD targets per discount, a
            per-batch stand-in for AMAGO's PopArt scale). The minimum over critics is pessimistic where they disagree,
            so the actor does not follow one critic's noise: on the 5x5 key-door the ensemble-mean Q ranked the four
            actions by about 0.01 env units, and a per-action offset of a sixth of that made the greedy policy walk
            into one wall. Filtered BC keeps the ensemble-mean advantage either way (as AMAGO).
        ema_decay: Decay of an exponential moving average (Polyak average) of all weights, kept beside the online
            agent and used for evaluation, so that the evaluated policy does not jump with the last few updates;
            0.0 = no copy (evaluate the online weights). The decay ramps up from 0.1 over the first updates
            (:func:`~meta.incontext.trainer.ema_rate`) so that the average never keeps the untrained weights.
    """

    encoder: Literal["transformer", "gru", "memory_free"] = "transformer"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    context_len: int = 512
    dropout: float = 0.0
    sigma_reparam: bool = True
    head_hidden: int = 64
    n_critics: int = 4
    critic_subset: int = 2
    gammas: list[float] = field(default_factory=lambda: [0.9, 0.99, 0.999])
    critic_head: Literal["twohot", "scalar"] = "twohot"
    critic_target: Literal["policy", "max"] = "policy"
    n_step: int = 1
    policy: Literal["actor", "critic"] = "actor"
    n_bins: int = 33
    bin_range: float = 6.0
    bin_low: float | None = None
    critic_coef: float = 1.0
    actor_coef: float = 1.0
    bc_coef: float = 0.1
    entropy_coef: float = 0.01
    lr: float = 3e-4
    lr_warmup_updates: int = 0
    lr_final_fraction: float = 1.0
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    tau: float = 0.005
    reward_scale: float = 1.0
    value_mean: Literal["symlog", "real"] = "symlog"
    critic_init: Literal["uniform", "lowest"] = "uniform"
    advantage_norm: bool = False
    actor_loss: Literal["advantage", "amago"] = "advantage"
    ema_decay: float = 0.0


def with_saved_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """A saved :class:`TrainConfig` dict with the defaults of the code that wrote it filled in.

    ``sigma_reparam`` was added (and later turned on by default) after the first runs were saved; a saved config
    without it ran with plain linear layers, so it reads as ``False`` rather than as today's default.
    """
    agent = dict(config.get("agent", {}))
    agent.setdefault("sigma_reparam", False)
    return {**config, "agent": agent}


@dataclass
class TrainConfig:
    """One training run of the in-context agent on one task.

    Attributes:
        task: ``bandit``, ``tmaze`` or ``keydoor``.
        n_arms: Bandit arms.
        horizon: Bandit pulls per task.
        corridor_length: T-maze corridor length L.
        keydoor_size: Side of the dark key-door's grid (8 is the benchmark's; a smaller grid is a cheaper gate).
        keydoor_episode_steps: Step limit of one inner episode of the key-door (AMAGO's 50).
        keydoor_trial_steps: Steps of one key-door trial, the meta-rollout that keeps one layout (AMAGO's 500).
        keydoor_cell_input: Append a one-hot of the agent's cell to the key-door's observation (the same information
            as its two scaled coordinates, in a form where a value that jumps at one cell is linear).
        keydoor_reached_cell_input: Append a one-hot of the cell the key-door agent's last move entered
            (:class:`~envs.metarl.keydoor.DarkKeyDoorEnv`'s ``reached_cell_input``): on the step that opens the door,
            the door's cell, while the agent is already back at the start.
        keydoor_cell_marks_entered: On the step that ends a key-door inner episode, mark the cell the last move
            entered in the one-hot cell as well as the start (``DarkKeyDoorEnv``'s ``cell_marks_entered``; needs
            ``keydoor_cell_input``): the door's cell in the same input units as the agent's own cell.
        keydoor_train_rooms: Room sides that the training actors' key-door tasks draw from (``DarkKeyDoorEnv``'s
            ``room_sizes``: smaller rooms inside the same grid and inputs); evaluation always plays the whole grid.
            ``None``: training plays the whole grid too.
        keydoor_train_rooms_until: Env steps after which the training actors play the whole grid again (a curriculum:
            small rooms first); ``None``: ``keydoor_train_rooms`` for the whole run.
        previous_obs_input: Append the previous observation to every RL^2 input, so one input is a whole transition
            (:class:`~envs.metarl.rl2.RL2Wrapper`'s ``previous_observation``). On the key-door the door's cell is
            otherwise in no single input: entering it resets the agent to the start, and the door is the cell before
            plus the move, two inputs apart.
        seed: Seeds networks, replay sampling, exploration and the task draws.
        total_env_steps: Environment steps to collect (the budget).
        max_minutes: Wall-clock cap; the run stops early (and says so) when it is reached. ``None``: no cap.
        n_envs: Parallel environments (one vector env); each collects whole meta-rollouts.
        batch_size: Windows per update.
        window: Timesteps per replayed window (whole rollouts when they are shorter); ignored with ``full_trials``.
        full_trials: Replay whole trials from step 0 (AMAGO, Sec. 4.1: context = trial length), so that every training
            token sees exactly the history it sees when acting; needs ``agent.context_len`` > the trial length.
            ``False``: random windows of ``window`` steps (the issue-7 setting; only a few per cent of tokens then see
            their acting history, ``meta.incontext.history_match``).
        time_input: Append the time in the trial, ``t / trial length``, to every input (AMAGO's time index), so the
            agent knows how much of the trial is left.
        updates_per_step: Gradient updates per collected environment step.
        learning_starts: Environment steps collected before the first update.
        buffer_trajectories: Replay capacity in whole trajectories (oldest dropped first).
        eps_start: Epsilon of every actor at the start.
        eps_end_low: Final epsilon of the first actor.
        eps_end_high: Final epsilon of the last actor (finals are spaced geometrically between the two).
        eps_anneal_steps: Environment steps over which epsilon is annealed linearly.
        exploration: ``per_actor`` (:class:`~meta.incontext.exploration.PerActorEpsilon`: constant within a trial,
            ``eps_*`` above) or ``bilevel`` (:class:`~meta.incontext.exploration.BilevelEpsilon`: high early in a trial
            and low late, both annealed over ``eps_anneal_steps``, times a per-actor multiplier; ``bilevel_*`` below).
        bilevel_start: ``(begin, final)`` epsilon at a trial's first step, at the start and the end of the anneal.
        bilevel_end: ``(begin, final)`` epsilon at a trial's last step.
        bilevel_randomize: Per-actor multipliers uniform in [0, 1), redrawn every trial (AMAGO's ``randomize_eps``).
        novelty_bonus: Reward added in the critic's targets (env reward units) for each step that reaches an
            observation new to its trial (:func:`~meta.incontext.exploration.first_visits`: on the key-door a cell not
            yet visited with that key state), a within-trial count bonus that pays a systematic search. It is never
            in the agent's inputs, its logged returns or its evaluation. 0: none.
        novelty_anneal_steps: Env steps over which ``novelty_bonus`` falls linearly to 0, applied to the whole replay
            at each update (so from then on the critic learns the env's reward alone); ``None``: constant.
        eval_tasks: Fresh tasks per evaluation (greedy policy).
        eval_every_steps: Evaluate after this many environment steps (and at the end).
        stop_at_return: Stop early once an evaluation reaches this mean return (``None``: never).
        checkpoint_every: Save a checkpoint every this many collection iterations.
        device: Where the agent acts and trains: ``cpu`` (the default, the tested path of every committed result),
            ``cuda``, ``cuda:N`` or ``auto`` (:func:`rolloutlab.device.resolve_device`). Replay, environments and
            every random draw stay on the CPU (policy samples come from the trainer's CPU generator), so a run's
            random stream, and its checkpoint, do not depend on the device.
        agent: Network and loss.
    """

    task: Literal["bandit", "tmaze", "keydoor"] = "bandit"
    n_arms: int = 5
    horizon: int = 100
    corridor_length: int = 10
    keydoor_size: int = 8
    keydoor_episode_steps: int = 50
    keydoor_trial_steps: int = 500
    keydoor_cell_input: bool = False
    keydoor_reached_cell_input: bool = False
    keydoor_cell_marks_entered: bool = False
    keydoor_train_rooms: list[int] | None = None
    keydoor_train_rooms_until: int | None = None
    previous_obs_input: bool = False
    seed: int = 0
    total_env_steps: int = 100_000
    max_minutes: float | None = None
    n_envs: int = 8
    batch_size: int = 16
    window: int = 128
    full_trials: bool = False
    time_input: bool = False
    updates_per_step: float = 0.02
    learning_starts: int = 1_000
    buffer_trajectories: int = 1_000
    eps_start: float = 1.0
    eps_end_low: float = 0.01
    eps_end_high: float = 0.2
    eps_anneal_steps: int = 20_000
    exploration: Literal["per_actor", "bilevel"] = "per_actor"
    bilevel_start: tuple[float, float] = (1.0, 0.05)
    bilevel_end: tuple[float, float] = (0.8, 0.01)
    bilevel_randomize: bool = True
    novelty_bonus: float = 0.0
    novelty_anneal_steps: int | None = None
    eval_tasks: int = 200
    eval_every_steps: int = 20_000
    stop_at_return: float | None = None
    checkpoint_every: int = 5
    device: str = "cpu"
    agent: AgentConfig = field(default_factory=AgentConfig)

    def __post_init__(self) -> None:
        if self.total_env_steps < 1 or (self.max_minutes is not None and not self.max_minutes > 0):
            raise ValueError(
                "need total_env_steps >= 1 and max_minutes > 0 (or None), got "
                f"{self.total_env_steps}, {self.max_minutes}"
            )
        if self.keydoor_episode_steps < 1 or self.keydoor_trial_steps < 1:
            raise ValueError(
                "need keydoor_episode_steps >= 1 and keydoor_trial_steps >= 1, got "
                f"{self.keydoor_episode_steps}, {self.keydoor_trial_steps}"
            )
        if self.novelty_bonus < 0 or (self.novelty_anneal_steps is not None and self.novelty_anneal_steps < 1):
            raise ValueError(
                "need novelty_bonus >= 0 and novelty_anneal_steps >= 1 (or None), got "
                f"{self.novelty_bonus}, {self.novelty_anneal_steps}"
            )
        if not self.agent.reward_scale > 0:
            raise ValueError(f"need agent.reward_scale > 0, got {self.agent.reward_scale}")
