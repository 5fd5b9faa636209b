"""The decode step as a list of operations, one module per kind (attention, GEMM, MoE experts, glue,
all-reduce, lm_head and sampling). Each module prices its operation from the calibration's parameters
and returns an `OpCost`; a step is the sum of its operations, its breakdown keyed by op name."""
