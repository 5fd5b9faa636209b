"""Batch logs: what engines did per decode step, read back into the cost model (`analyze`,
`simulate-log`, the vLLM scheduler converter)."""
