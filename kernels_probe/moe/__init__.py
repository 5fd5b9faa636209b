"""MoE: routed-expert grouped GEMMs and whole MoE / MLA + MoE decode steps."""
