"""Inputs at the edge: workload YAML, model presets and HF configs, hardware profiles, dtypes, axes."""
