"""Attention: the probe's grid of decode configurations, its inputs and float32 references, and the backends it
times (our Triton kernels, torch's flash attention, FlashInfer), MLA included."""
