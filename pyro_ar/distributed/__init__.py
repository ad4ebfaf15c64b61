r"""Distributed A&R on ``torch.distributed`` (gloo on CPU, NCCL on GPU, launched by ``torchrun``).

* :mod:`~pyro_ar.distributed.process_group` -- start from ``torchrun``'s environment (and
  stop: :func:`shutdown_process_group`, an exit hook for gloo), ranks, contiguous shards,
  per-rank file names.
* :mod:`~pyro_ar.distributed.collectives` -- counted all-reduces: :func:`sum_across`
  (identity backward), :func:`max_across`, sparse rows.
* :mod:`~pyro_ar.distributed.random_stream` -- a rank's own checkpointed random stream.
* :mod:`~pyro_ar.distributed.data_parallel` -- data-parallel SVI: :class:`ShardedDataPlate`,
  :func:`data_parallel` (gradients of the global parameters averaged before each step).
* :mod:`~pyro_ar.distributed.class_sharded` -- model parallel over the K classes:
  :class:`ClassShardedLinearClassifier`, whose A&R class sum is split over the ranks.
* :mod:`~pyro_ar.distributed.sharded_evaluation` -- test log-likelihood over all K, shard by shard.

Example:

>>> from pyro_ar.distributed import init_process_group, rank_path
>>> rank, world = init_process_group()      # under torchrun: the process group is started
>>> rank_path("run.pt", rank, world)
'run.rank0-of-1.pt'
"""

from .class_sharded import (
    ClassShard,
    ClassShardedLinearClassifier,
    ShardedAR,
    ShardedAugmentedCategorical,
    ShardedLinearUtility,
    class_shard,
)
from .collectives import COMM, CommCounter, max_across, sum_across
from .data_parallel import (
    ShardedDataPlate,
    data_parallel,
    mean_across,
    reduce_gradients,
)
from .process_group import (
    DEFAULT_TIMEOUT,
    default_backend,
    describe_failure,
    free_port,
    get_rank,
    get_world_size,
    init_process_group,
    is_distributed,
    rank_path,
    shard_range,
    shutdown_process_group,
)
from .random_stream import RandomStream
from .sharded_evaluation import sharded_evaluate

__all__ = [
    "init_process_group", "shutdown_process_group", "DEFAULT_TIMEOUT", "describe_failure", "is_distributed", "get_rank", "get_world_size", "default_backend",
    "shard_range", "rank_path", "free_port", "RandomStream", "COMM", "CommCounter", "sum_across",
    "max_across", "ShardedDataPlate", "data_parallel", "reduce_gradients",
    "mean_across", "ClassShard", "class_shard", "ShardedLinearUtility", "ShardedAugmentedCategorical",
    "ShardedAR", "ClassShardedLinearClassifier", "sharded_evaluate",
]
