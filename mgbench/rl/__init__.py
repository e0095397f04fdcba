"""Train on mgbench: the reward of a completion (reward.py), a batch reward service with eval's isolation
(service.py), the `verifiers` environment (environment.py) and a TRL reward function (trl.py).
docs/train.md describes the reward and the commands."""
