"""Validation: run tasks on N rank processes (gloo on CPU, NCCL on GPU) and check them.

Imports only torch and the standard library (the GPU machines lack datasets/libcst/PyGithub).

The rank pool and its jobs: pool.py (RankPool), worker.py (a rank process and the handler table),
jobs.py (the typed job records sent to the ranks), backends.py, p2p_staging.py. The validate stage:
commands.py, run.py, checks.py, compare.py, contract.py, importcheck.py. Shared with the GPU
pass and eval: timing.py (the timing method), topology.py (also read by the dataset card). Rooms:
gpu/ (the timing pass of `validate --timing`), eval/ (`mgbench eval` and `mgbench score`), executors/
(sharding over processes, SLURM, Ray).
"""
