"""Tensor parallelism over the GPUs of one host (NCCL), or CPU processes (gloo) for tests.

One process per rank. Rank 0 is the engine's own process: its scheduler and block manager are the only
ones, and `runner.TensorParallelRunner.execute` broadcasts each step to the worker processes (ranks
1..N-1, `worker.py`), which run the same forward pass over their shard of the model (`sharding.py`).
Only rank 0 samples. See docs/TENSOR_PARALLEL.md.

Modules are imported by name (`from inference.distributed.runner import ...`): the model runner imports
`sharding`, and `runner` imports the model runner.
"""
