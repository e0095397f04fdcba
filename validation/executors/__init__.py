"""Scale-out of `validate` and `eval` batch mode on engines people already run (docs/scale-out.md).

shard     the unit of work (Shard), its part file and the merge into the JSONL store
runner    runs one shard in a process (validate() / run_batch()); the shard subprocess entry
local     this node: concurrent shards on disjoint GPUs (or CPUs) and port ranges
slurm     a submitit job array, one job per node's worth of ranks, checkpoint + requeue
ray       Ray tasks reserving GPUs; placement groups for shards wider than a node
cluster   rank pools spanning nodes (head + per-node agents), used by slurm and ray
bundle    shards that carry their files (Ray workers without the driver's file system)
dispatch  deterministic planning, skipping settled items, merging; cli / options: the CLI

Imports torch and the standard library only; submitit and ray are imported by their executors.
"""
