"""How far the run sum over sampled steps (cost/run_load.py) is from the step-by-step sum, on long
runs (9,000 to 200,000 steps) of three models, two GPUs and every parameter set.

    python benchmarks/run_quadrature_error.py
"""
from cascade_plan import ParamsChoice, Scenario, TreeNode, load_hardware, load_model, select_params
from cascade_plan.cost.cost_model import gpu_shape
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.run_load import tree_run_costs

worst = 0
for model in ["llama-3-8b", "deepseek-v3", "qwen2.5-7b"]:
    for hw in ["h200", "h100-sxm"]:
        for out in [9000, 40000, 200000]:
            tree = TreeNode(tokens=4096, children=[TreeNode(tokens=512, copies=4, samples=16, output_tokens=out),
                                                   TreeNode(tokens=64, samples=8, output_tokens=out // 3,
                                                            private_tokens=200)])
            m, h = load_model(model), load_hardware(hw)
            scn = Scenario(name="q", model=m, hardware=h, kv_dtype="bf16", weight_dtype="bf16",
                           tp=8 if model == "deepseek-v3" else 1,
                           prefix_caching=True, block_size=16, tree=tree)
            for label, p in [("ideal", select_params(None, ParamsChoice(ideal=True))),
                             ("default", select_params(scn, ParamsChoice(uncalibrated=True))),
                             ("cal", select_params(scn, ParamsChoice(force=True)))]:
                g = gpu_shape(m, h, "bf16", "bf16", scn.tp)
                flat = flatten(tree)
                ex = tree_run_costs(flat, g, m, "bf16", scn.tp, p, budget=10**7)
                sa = tree_run_costs(flat, g, m, "bf16", scn.tp, p)
                for f in ("ps_step_s", "cas_step_s"):
                    a, b = ex.run_total(getattr(ex.costs, f)), sa.run_total(getattr(sa.costs, f))
                    worst = max(worst, abs(b / a - 1))
print("worst relative difference of the sampled run sum vs step by step:", worst)
