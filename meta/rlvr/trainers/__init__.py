"""RLVR trainers (torch): the compact GRPO trainer (:mod:`.grpo`), DART's asynchronous rollouts (:mod:`.dart`), DARS-B
(:mod:`.dars_breadth`), supervised warm starts (:mod:`.sft`), the run driver with checkpoint/resume (:mod:`.run`) and
the calculator tool (:mod:`.tools`). Import the modules explicitly.
"""
