#!/usr/bin/env bash
# GPU smoke test: every trainer for a few steps with --device cuda, in one command, on a machine with a CUDA GPU and a
# CUDA build of torch. Checks that each run finishes, that its checkpoint says it ran on the GPU, and that
# GPU-written checkpoints load back on the CPU (MBPO resumed with --device cpu, the in-context agent evaluated on the
# CPU). The SFT warm start runs on the CPU and its checkpoint is then trained on the GPU (the other direction).
# Stops at the first failure with a nonzero exit code; prints each command before it runs and a summary at the end.
# Nothing here is a benchmark: the budgets are tiny and no result is kept (everything goes to a temporary folder).
#
#   experiments/gpu_smoke.sh                   # on cuda (the first GPU)
#   DEVICE=cuda:1 experiments/gpu_smoke.sh     # on another GPU
#   PY=python experiments/gpu_smoke.sh         # another interpreter (default .venv/bin/python)
#   DEVICE=cpu experiments/gpu_smoke.sh        # the same on the CPU: a check of this script where there is no GPU
#
# VLLM=1 adds the TRL adapter with real vLLM generation (needs `pip install vllm` and the model below downloadable or
# cached): colocate mode on $DEVICE, then server mode with a `vllm serve` process on a second GPU (skipped, with a
# message, on a machine with one GPU: NCCL's weight sync cannot pair two ranks on one device). The CPU tests cover the
# adapter's side of the protocol against a stand-in server; only these runs exercise vLLM itself.
#   VLLM=1 experiments/gpu_smoke.sh
#   VLLM=1 VLLM_MODEL=Qwen/Qwen2.5-0.5B-Instruct VLLM_PORT=8011 VLLM_BIN=vllm experiments/gpu_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
PY=${PY:-.venv/bin/python}
DEVICE=${DEVICE:-cuda}
VLLM=${VLLM:-0}
VLLM_MODEL=${VLLM_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
VLLM_PORT=${VLLM_PORT:-8011}
VLLM_BIN=${VLLM_BIN:-$(dirname "$PY")/vllm}  # the vllm command beside the interpreter
OUT=$(mktemp -d -t rolloutlab-gpu-smoke-XXXXXX)
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$OUT"' EXIT
RAN=()

run() {  # run NAME COMMAND...: print, run, remember
    local name=$1
    shift
    echo "== $name: $*"
    "$@"
    RAN+=("$name")
}

rl() { "$PY" -m rolloutlab.cli "$@"; }

only_dir() {  # the one run directory under $1
    local dirs=("$1"/*/)
    [ ${#dirs[@]} -eq 1 ] || { echo "expected one run directory under $1, found ${#dirs[@]}" >&2; exit 1; }
    echo "${dirs[0]%/}"
}

ran_on() {  # ran_on CHECKPOINT KEYS...: the checkpoint's config (at KEYS) names $DEVICE
    "$PY" - "$DEVICE" "$@" <<'EOF'
import sys
from rolloutlab.checkpoint import load_checkpoint
from rolloutlab.device import resolve_device

expected, path, *keys = sys.argv[1:]
config = load_checkpoint(path)["config"]
for key in keys:
    config = config[key]
print(f"   {path}: ran on {config['device']}")
sys.exit(0 if config["device"] == str(resolve_device(expected)) else f"expected {expected}")
EOF
}

"$PY" - "$DEVICE" <<'EOF'
import sys
import torch
from rolloutlab.device import resolve_device

try:
    device = resolve_device(sys.argv[1])
except ValueError as exc:
    sys.exit(f"gpu_smoke: {exc}")
name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {name} ({device})")
EOF

cat > "$OUT/mbpo.yaml" <<'EOF'
initial_random_steps: 100
epoch_length: 100
model_train_freq: 100
rollout_batch_size: 1000
updates_per_step: 2
eval_every: 100
eval_episodes: 1
log_every: 100
checkpoint_every: 100
sac: {batch_size: 64, net_arch: [64, 64]}
model: {ensemble_size: 3, num_elites: 2, hidden_size: 64, num_layers: 2, max_epochs: 5}
EOF
# The same run with the speed options: the fused SAC backend, fused and data-scaled model fits.
grep -v '^sac:\|^model:' "$OUT/mbpo.yaml" > "$OUT/mbpo_fast.yaml"
cat >> "$OUT/mbpo_fast.yaml" <<'EOF'
sac: {batch_size: 64, net_arch: [64, 64], backend: fused}
model: {ensemble_size: 3, num_elites: 2, hidden_size: 64, num_layers: 2, max_epochs: 5, fused_optimizer: true,
        min_train_epochs: 2.0}
EOF
cat > "$OUT/dyna.yaml" <<'EOF'
phase_length: 100
learning_starts: 50
buffer_size: 1000
net_arch: [64, 64]
num_model_rollouts: 50
model_train_freq: 50
rollout_freq: 50
eval_episodes: 1
model: {ensemble_size: 3, num_elites: 2, hidden_size: 32, num_layers: 2, max_epochs: 5}
EOF
cat > "$OUT/pets.yaml" <<'EOF'
initial_random_steps: 60
model_train_freq: 30
eval_every: 30
eval_episodes: 1
log_every: 30
num_particles: 5
cem: {population: 100, iterations: 3}
model: {ensemble_size: 3, num_elites: 3, hidden_size: 32, num_layers: 2, min_train_steps: 100}
EOF
cat > "$OUT/incontext.yaml" <<'EOF'
n_arms: 2
horizon: 10
n_envs: 4
batch_size: 8
window: 16
updates_per_step: 0.1
learning_starts: 0
eval_tasks: 8
eval_every_steps: 1000000000
checkpoint_every: 1
agent: {d_model: 32, n_layers: 1, n_heads: 2, head_hidden: 32, context_len: 32}
EOF
cat > "$OUT/rlvr.yaml" <<'EOF'
allocator: ar3po:2,3
steps: 3
eval_every: 3
checkpoint_every: 1
pool_size: 16
held_out_size: 20
grpo: {prompts_per_step: 4, max_new_tokens: 4, kl_coef: 0.01, minibatches: 2}
EOF

run "MBPO (Pendulum-v1)" rl mbrl train --algo mbpo --env Pendulum-v1 --steps 200 --config "$OUT/mbpo.yaml" \
    --device "$DEVICE" --out "$OUT/mbpo"
MBPO_RUN=$(only_dir "$OUT/mbpo")
ran_on "$MBPO_RUN/checkpoint.pt"
run "MBPO checkpoint back on the CPU" rl mbrl train --resume "$MBPO_RUN" --device cpu

run "Dyna-DQN (CartPole-v1)" rl mbrl train --algo dyna --env CartPole-v1 --steps 200 --controller fixed:2 \
    --config "$OUT/dyna.yaml" --device "$DEVICE" --out "$OUT/dyna"
ran_on "$(only_dir "$OUT/dyna")/checkpoint.pt" dyna

run "MBPO, fused SAC and fused model fits with the data-scaled floor" rl mbrl train --algo mbpo --env Pendulum-v1 \
    --steps 200 --config "$OUT/mbpo_fast.yaml" --device "$DEVICE" --out "$OUT/mbpo_fast"
ran_on "$(only_dir "$OUT/mbpo_fast")/checkpoint.pt"

run "Dyna-DQN, 3 runs with one run-axis world model" "$PY" - "$DEVICE" <<'EOF'
import sys

import gymnasium as gym
import numpy as np

from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig
from mbrl.models import ModelConfig

device = sys.argv[1]
model = ModelConfig(ensemble_size=3, num_elites=2, hidden_size=32, num_layers=2, max_epochs=5)
cfg = DynaConfig.for_env(
    "CartPole-v1", budget=200, phase_length=100, learning_starts=50, buffer_size=1000, net_arch=[64, 64],
    num_model_rollouts=50, model_train_freq=50, rollout_freq=50, batched_models=True, device=device, model=model,
)
learner = BatchedDynaDQN([lambda: gym.make("CartPole-v1")] * 3, cfg, seed=0)
for k in (0, 2):
    feedback = learner.run_phase([k] * 3)
returns = learner.evaluate(1)
assert np.isfinite(returns).all() and len(feedback) == 3, (returns, feedback)
print(f"   batched world models on {device}: greedy returns {returns.tolist()}")
EOF

run "PETS (rolloutlab/PointMass-v0)" rl mbrl train --algo pets --env rolloutlab/PointMass-v0 --steps 90 \
    --controller fixed:8 --config "$OUT/pets.yaml" --device "$DEVICE" --out "$OUT/pets"
ran_on "$(only_dir "$OUT/pets")/checkpoint.pt"

run "SFT warm start (CPU)" rl rlvr sft --steps 20 --out "$OUT/sft.pt"
run "GRPO, compact trainer" rl rlvr train --checkpoint "$OUT/sft.pt" --config "$OUT/rlvr.yaml" --no-progress \
    --device "$DEVICE" --out "$OUT/rlvr"
ran_on "$(only_dir "$OUT/rlvr")/checkpoint.pt" grpo

run "In-context agent (bandit)" rl incontext train --task bandit --steps 200 --config "$OUT/incontext.yaml" \
    --device "$DEVICE" --runs-root "$OUT/incontext"
IC_RUN=$(only_dir "$OUT/incontext")
ran_on "$IC_RUN/checkpoint.pt"
run "In-context agent evaluated on the CPU" rl incontext eval "$IC_RUN/checkpoint.pt" --tasks 4 --device cpu

if [ "$VLLM" = 1 ]; then
    run "TRL adapter + vLLM, colocate mode" "$PY" experiments/rlvr/vllm_smoke.py --mode colocate \
        --model "$VLLM_MODEL" --output-dir "$OUT/vllm_colocate"
    if [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
        echo "== starting vllm serve $VLLM_MODEL on GPU 1, port $VLLM_PORT"
        CUDA_VISIBLE_DEVICES=1 VLLM_SERVER_DEV_MODE=1 "$VLLM_BIN" serve "$VLLM_MODEL" --port "$VLLM_PORT" \
            --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1 \
            --gpu-memory-utilization 0.5 > "$OUT/vllm_server.log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 300); do
            "$PY" -c "import requests; requests.get('http://127.0.0.1:$VLLM_PORT/health', timeout=2)" \
                2>/dev/null && break
            kill -0 "$SERVER_PID" 2>/dev/null || { tail -50 "$OUT/vllm_server.log"; exit 1; }
            sleep 2
        done
        run "TRL adapter + vLLM, server mode" env CUDA_VISIBLE_DEVICES=0 "$PY" experiments/rlvr/vllm_smoke.py \
            --mode server --model "$VLLM_MODEL" --server-url "http://127.0.0.1:$VLLM_PORT" --output-dir "$OUT/vllm_server"
        kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    else
        echo "== skipped TRL adapter + vLLM, server mode: it needs a second GPU for the vllm serve process"
    fi
fi

echo "gpu_smoke: all ${#RAN[@]} passed on $DEVICE:"
printf '  %s\n' "${RAN[@]}"
