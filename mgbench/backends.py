"""The rank pool's backends, as a table: where a rank's tensors live, which process group joins the ranks,
and whether a time measured on it is a result.

- gloo: CPU tensors over gloo (CI, laptops): correctness at smoke size; its timings are never results.
- nccl: one GPU per rank over NCCL: correctness at any size, and the only timings that are results.
- shared-gpu: every rank's tensors on a GPU, ranks placed round-robin over the visible GPUs (one GPU may
  hold all of them), joined by gloo over CUDA tensors. NCCL refuses two ranks on one GPU; gloo runs every
  collective on CUDA tensors but point-to-point, which the rank process stages through host memory
  (validation/p2p_staging.py), and torch.compile'd functions run eagerly there (their graphs' collectives
  crash gloo on CUDA tensors). Full-size correctness on a machine with fewer GPUs than ranks; its timings
  are host-staged and never results.

Shared vocabulary on the ground floor (the CLI, validation, eval and the dataset card read it); standard
library only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    name: str  # what --backend takes and the records carry
    process_group: str  # torch.distributed backend the ranks join
    on_gpu: bool  # rank tensors live on a CUDA device
    gpu_per_rank: bool  # each rank needs a GPU of its own
    stage_p2p_through_host: bool  # send/recv of CUDA tensors copied through host buffers
    timings_are_results: bool  # a time measured here may be published or counted in fast_p
    help: str
    # torch.compile'd functions run eagerly in the rank processes: a compiled graph's collectives over gloo
    # on CUDA tensors crashed the rank (a segfault in the graph's all_gather, results/cuda-shared-pass10-*)
    compile_eagerly: bool = False

    @property
    def shares_devices(self) -> bool:
        """Several ranks may hold tensors on one GPU: a rank's full-size work competes with its neighbours'."""
        return self.on_gpu and not self.gpu_per_rank

    @property
    def proves(self) -> str:
        """What a validation record of this backend proves (the dataset card says it per row)."""
        if self.timings_are_results:
            return "correctness and timings"
        return "correctness only (ranks share GPUs)" if self.on_gpu else "correctness on CPU"


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("gloo", "gloo", False, False, False, False, "CPU tensors over gloo"),
        Backend("nccl", "nccl", True, True, False, True, "one GPU per rank over NCCL"),
        Backend(
            "shared-gpu",
            "gloo",
            True,
            False,
            True,
            False,
            "ranks share the visible GPUs (round-robin; one GPU may hold all) over gloo on CUDA tensors: "
            "correctness only, timings host-staged",
            compile_eagerly=True,
        ),
    )
}
NAMES = tuple(BACKENDS)


def backend(name: str) -> Backend:
    """The backend called `name`; a ValueError naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(NAMES)})") from None


def device_shortfall(name: str, world_size: int, gpu_count: int) -> str | None:
    """Why `world_size` ranks of backend `name` cannot run with `gpu_count` visible GPUs (None: they can),
    in one line that names the backend to use instead."""
    chosen = backend(name)
    if not chosen.on_gpu:
        return None
    if gpu_count < 1:
        return (
            f"--backend {name} needs a visible CUDA device and none is (torch sees no GPU); "
            "--backend gloo runs the same checks on CPU, at smoke size"
        )
    if chosen.gpu_per_rank and gpu_count < world_size:
        return (
            f"--backend {name} needs one GPU per rank: world size {world_size}, {gpu_count} GPU(s) visible; "
            "--backend shared-gpu runs the ranks on fewer GPUs (correctness only)"
        )
    return None


def visible_gpu_count() -> int:
    """CUDA devices torch sees here (0 without a GPU or a CUDA build); imports torch when called."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def require_devices(name: str, world_size: int) -> None:
    """A ValueError (device_shortfall's line) when this machine lacks the GPUs `world_size` ranks of backend
    `name` need; torch is imported only for a GPU backend."""
    if not backend(name).on_gpu:
        return
    shortfall = device_shortfall(name, world_size, visible_gpu_count())
    if shortfall:
        raise ValueError(shortfall)


def gpu_of_rank(rank: int, gpu_count: int) -> int:
    """The GPU a rank runs on: round-robin over the visible GPUs (rank r on GPU r when there are enough)."""
    if gpu_count < 1:
        raise ValueError("no CUDA device is visible")
    return rank % gpu_count


def placement(world_size: int, gpu_count: int) -> list[int]:
    """The GPU of every rank of a pool."""
    return [gpu_of_rank(r, gpu_count) for r in range(world_size)]


def help_text() -> str:
    """One line per backend, for --backend's help."""
    return "; ".join(f"{b.name}: {b.help}" for b in BACKENDS.values())
