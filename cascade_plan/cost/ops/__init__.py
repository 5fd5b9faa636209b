"""The decode step as a list of operations, one module per op (attention per mode included: the per-sequence
decode, the cascade's prefix pass, suffix pass and merge), all with one interface: `cost(ctx: StepContext) ->
OpCost | None` (context.py, base.py), listed in registry.py. A step is the list of its mode's ops
(cost/cost_model.py), its breakdown keyed by op name."""
