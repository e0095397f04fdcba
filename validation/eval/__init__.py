"""Scoring candidate solutions: `mgbench eval` (correctness, integrity, timing, speedups) and
`mgbench score` (pass@k, fast_p@k, geometric-mean speedup, roofline fraction, plots).

Candidate code is untrusted: it is parsed (static checks) but never imported in the main process;
it runs in fresh rank processes started for that candidate (mgbench.validation.eval.judge.candidate),
with a timeout; the reference runs in clean ranks of its own and every check in the judge
(mgbench.validation.eval.judge). Exit codes of `mgbench eval`: 0 correct, 1 incorrect (or rejected), 2 error or timeout.
"""

EXIT_CORRECT, EXIT_INCORRECT, EXIT_ERROR = 0, 1, 2
