"""The words a model sees besides the task's own prompt: the system prompt and the multi-turn feedback (the
`mgbench eval` verdict of its last answer, the JSON the Inspect agent's evaluate() tool returns)."""

from __future__ import annotations

from mgbench.rl.service import Scored

SYSTEM_PROMPT = (
    "You are an expert in multi-GPU programming (CUDA, NCCL, torch.distributed, Triton). Answer with the complete "
    "solution file in one ```python code block; only the last such block of your answer is evaluated."
)
FEEDBACK = """\
The evaluation of your last answer (`mgbench eval`: static checks, correctness trials on fresh inputs at every \
rank and once on the same input tensors refilled in place, timing against the reference) returned:

{verdict}

{ask} You have {left} more answer(s). Reply with the complete solution file in one ```python block."""
ASK_FIX = "It is not accepted; fix it."
ASK_FASTER = "It is correct; make it faster if you can (the reward grows with the speedup where timings count)."
CORRECT_KINDS = ("sol", "speedup", "correct_only")  # reward kinds of a counted correct answer


def is_correct(scored: Scored) -> bool:
    return scored.reward.kind in CORRECT_KINDS


def feedback_message(scored: Scored, left: int) -> str:
    """The user turn that answers an answer in the multi-turn protocol."""
    ask = ASK_FASTER if is_correct(scored) else ASK_FIX
    return FEEDBACK.format(verdict=scored.feedback(), ask=ask, left=left)
