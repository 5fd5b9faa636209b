"""One GPU: the Llama-3-70B GRPO steps of the multi-GPU plan as one TP rank's shard (no all-reduce), at
TP 2, 4 and 8, to check the shapes and the step build before a multi-GPU machine is lent. Not a TP step
time (the all-reduces are missing). python benchmarks/tp_shard_smoke.py OUT.json"""

import json
import sys

import torch

from kernels_probe.steps.step_shapes import tp_step_points
from kernels_probe.steps.whole_steps import measure_steps
from kernels_probe.timing import L2Flusher

dev = torch.device("cuda")
props = torch.cuda.get_device_properties(dev)
fl = L2Flusher(props.L2_cache_size, dev)
out = {}
for tp in (2, 4, 8):
    pts = [p for p in tp_step_points(quick=True) if p.position == "first"]
    rows, skipped = measure_steps(fl, dev, props.multi_processor_count, quick=True, backends=["flashinfer", "triton"],
                                  glue="fused", tp=tp, points=pts)
    out[tp] = {"rows": rows, "skipped": skipped}
    for r in rows:
        print(f"TP{tp} shard {r['workload']} {r['position']} {r['backend']} {r['mode']}: {r['median_s'] * 1e3:.2f} ms")
    for s in skipped:
        print(f"TP{tp} skipped {s.get('backend')} {s.get('mode')}: {s['reason'][:200]}")
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[1], "w"), default=str)
