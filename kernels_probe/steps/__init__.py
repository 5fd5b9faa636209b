"""The rest of the decode step: weight GEMMs, engine glue, layer graphs and whole model-shaped steps, and
`probe --workload`'s shapes."""
