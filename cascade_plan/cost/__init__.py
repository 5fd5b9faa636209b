"""The cost model: pure numpy over validated inputs, SI units; estimates, sweeps, capacity, checks."""
