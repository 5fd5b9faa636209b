"""What serving engines would do with a workload (vLLM's cascade gate)."""
