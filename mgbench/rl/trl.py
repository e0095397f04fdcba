"""A reward function for TRL's GRPOTrainer (`reward_funcs=[...]`), scored by the reward service.

    from mgbench.rl.trl import MgbenchReward, trl_dataset
    train = trl_dataset("mgbench-out/dataset", levels=[1, 2])          # columns: prompt, task_id
    trainer = GRPOTrainer(model=..., reward_funcs=[MgbenchReward("mgbench-out/dataset")], train_dataset=train, ...)

TRL calls a reward function as `f(prompts=..., completions=..., completion_ids=..., **columns)`, where every
other dataset column arrives as a keyword argument holding one value per completion (here `task_id`), with
`trainer_state`, `log_metric` and `log_extra` (TRL >= 1.0); completions are strings, or message lists for
conversational datasets. It returns one float per completion, in order. TRL is not a dependency of mgbench:
nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mgbench.rl.prompts import SYSTEM_PROMPT
from mgbench.rl.reward import KINDS
from mgbench.rl.service import RewardService, RewardSettings, run_sync
from mgbench.taskrows import as_list, prompt_of, resolve_dataset, select_rows


class MgbenchReward:
    """`reward_funcs` entry: the reward (mgbench.rl.reward) of each completion for its row's task."""

    def __init__(self, dataset: str, world_size: int = 2, task_column: str = "task_id", **eval_settings: Any):
        """`eval_settings` are RewardSettings fields (trials, timing, timeout, max_evals, deadline, ...)."""
        self.__name__ = "mgbench"  # the name TRL logs the reward under (rewards/mgbench/mean)
        self.task_column = task_column
        self.settings = RewardSettings(dataset=resolve_dataset(dataset), world_size=world_size, **eval_settings)
        self._service: RewardService | None = None

    @property
    def service(self) -> RewardService:
        if self._service is None:
            self._service = RewardService(self.settings)
        return self._service

    def __getstate__(self) -> dict[str, Any]:  # picklable (the service holds a lock; it is rebuilt)
        return {**self.__dict__, "_service": None}

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        completions = list(completions or [])
        ids = kwargs.get(self.task_column)
        if ids is None:
            raise ValueError(
                f"the reward needs the dataset column {self.task_column!r} (the mgbench task id of each prompt); "
                "mgbench.rl.trl.trl_dataset builds a dataset that has it"
            )
        ids = [ids] * len(completions) if isinstance(ids, str) else list(ids)
        scored = run_sync(lambda: self.service.evaluate_batch(completions, ids))
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric) and scored:
            for kind in KINDS:
                log_metric(f"mgbench/{kind}", sum(s.reward.kind == kind for s in scored) / len(scored))
        if callable(log_extra):
            log_extra("mgbench_kind", [s.reward.kind for s in scored])
        return [s.reward.value for s in scored]


def trl_dataset(
    dataset: str,
    split: str | None = None,
    levels: int | str | Sequence[int] | None = None,
    task_ids: str | Sequence[str] | None = None,
    world_size: int = 2,
    prompt_backend: str = "cuda",
    conversational: bool = True,
    system_prompt: str | None = None,
) -> Any:
    """A `datasets.Dataset` for GRPOTrainer: `prompt` (a message list, or the text when not conversational)
    and `task_id`, one row per selected task."""
    import datasets

    system = SYSTEM_PROMPT if system_prompt is None else system_prompt
    rows = select_rows(dataset, split, levels, as_list(task_ids) or None, world_size)
    out = []
    for row in rows:
        text = prompt_of(row, prompt_backend)
        prompt: Any = text
        if conversational:
            prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        out.append({"prompt": prompt, "task_id": row["task_id"]})
    return datasets.Dataset.from_list(out)
