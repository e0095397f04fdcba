"""The GPU timing pass of `mgbench validate --timing`: full-size correctness, eager and null-candidate
timings, the baselines and the communication-aware roofline, written under results/<hardware-tag>/.

commands.py  the `--timing` options and their entry (cmd_gpu)
run.py       the driver (GpuRun): check, time and baseline each task on an NCCL rank pool, resumably
handlers.py  the rank-side handlers of its jobs (ceilings, time, baseline), registered on import
baselines.py torch.compile and symmetric-memory versions of a reference, built on the ranks
ceilings.py  this machine's measured ceilings (matmul, HBM, NVLink collectives)
roofline.py  the per-call trace (FLOPs, HBM and communication bytes) and the roofline bound
report.py    acceptance summary and per-task table of a results folder

Shared with `mgbench eval` and the dataset stage, and so kept one level up: mgbench.validation.timing
(the timing method) and mgbench.validation.topology (the topology in words for the dataset card).
"""
