"""Decision-time planning: rollout / approximation in value space, Wordle, MPC on learned models."""
