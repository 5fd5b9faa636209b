"""Several GPUs of one host: NCCL all-reduce and tensor-parallel decode steps."""
