"""Tools the environment runs while the compact trainer samples: the calculator of the ``calc`` task family.

:class:`CalculatorTool` is a :class:`~meta.rlvr.lm.sampling.ToolHook`: when a row samples the last character of
``</calc>``, it decodes the row's completion, asks :func:`envs.reasoning.tooluse.tool_response` for the result and
returns its token ids, which the sampler inserts and marks so the policy-gradient loss skips them. With
``max_operations`` (:attr:`envs.reasoning.tooluse.CalcOptions.call_operations`) it refuses (``?``) a call holding more
operations than that.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.reasoning.tooluse import CALL_CLOSE, tool_response
from meta.rlvr.lm.vocab import CharVocab


class CalculatorTool:
    """Calculator hook over a character vocabulary.

    Args:
        vocab: Must contain every character of :data:`envs.reasoning.tooluse.TOOL_ALPHABET` that a call and its
            result use (build it with that alphabet).
        max_operations: Most operations one call may hold (a call with more gets ``?``); 0: any (the default).

    Attributes:
        calls: Calls answered so far (refusals included), in training and evaluation alike.

    Raises:
        ValueError: The vocabulary lacks a character of ``</calc>``, or ``max_operations`` < 0.
    """

    def __init__(self, vocab: CharVocab, max_operations: int = 0) -> None:
        vocab.encode(CALL_CLOSE)  # raises with the missing character
        if max_operations < 0:
            raise ValueError(f"max_operations must be >= 0 (0: any), got {max_operations}")
        self.vocab = vocab
        self.trigger = vocab.index[CALL_CLOSE[-1]]
        self.max_operations = int(max_operations)
        self.calls = 0

    def respond(self, completion: Sequence[int]) -> list[int]:
        """Result token ids when ``completion`` ends with ``</calc>``, else ``[]``; counts answered calls."""
        result = tool_response(self.vocab.decode(completion, stop_at_eos=True), self.max_operations)
        if result is None:
            return []
        self.calls += 1
        return self.vocab.encode(result)
