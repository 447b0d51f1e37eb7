"""Adaptive pixel reasoning: a tiny vision-language policy that learns when to call a zoom tool.

Rooms (import them explicitly; everything but :mod:`.arms` needs torch):

* :mod:`meta.rlvr.vision.arms` — the gate (tool forced, masked or the policy's choice) and the call reward (none, a
  fixed penalty, or the rollout-guided rule), as controllers, and their specs (:func:`~.arms.make_tool_arm`);
* :mod:`meta.rlvr.vision.policy` — the CNN + transformer policy and its action vocabulary (answers and zoom calls);
* :mod:`meta.rlvr.vision.trainer` — operation-aware SFT, GRPO with a tool-use arm, greedy evaluation;
* :mod:`meta.rlvr.vision.run` — one run with checkpoints and resume.

The task lives in :mod:`envs.vision.zoom_queries`.
"""
