"""The model of our Triton decode over shared pages with and without the busiest program's time per token, scored
on the rows the fit never sees. Before 2026-12-06 the planner's fit (calibration/fitting.py fit_l2) took the
largest of the HBM, FLOP, L2-streaming and latency bounds, the latency bound at a row's whole context (P + S tokens)
with the per-token latency of the decode over private pages. Where page blocks form, a block's first program streams
the shared run and then each of its sequences' private tails alone, and that program's streaming adds to the
bandwidth bounds rather than hiding under them. The candidate here: max(HBM, FLOP, L2 streaming) + (the longest
program's tokens) x a per-token time, its four parameters fitted on the training rows, without a correction surface.
The fit has taken the term in since (KernelFit.program_token_s): the "planner's fit" rows are refitted here by the
installed version, so they carry it too (at commit b494cfa they were the old model's).

    python benchmarks/shared_decode_program_latency.py CALIBRATED.json [...]

Each file: a probe file `cascade-plan calibrate` has fitted (its decode over private pages is the base). Prints,
per file, the held-out error of the planner's fit (with and without its correction surface) and of the candidate,
and the candidate's worst held-out rows."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import numpy as np

from cascade_plan.calibration.calibration_file import load_probe
from cascade_plan.calibration.fitting import _lm, features, fit_l2, fit_surface, predict, surface_doc
from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration.launch_rules import page_block_rule
from cascade_plan.cost.ops.page_blocks import page_blocks_of
from cascade_plan.own_kernel_blocks import longest_program_tokens


def ape(pred: np.ndarray, t: np.ndarray) -> str:
    a = np.abs(pred / t - 1)
    return f"median {np.median(a):6.1%}  p90 {np.percentile(a, 90):6.1%}  max {a.max():7.1%}"


def score(path: str) -> None:
    probe = load_probe(Path(path))
    rule, _ = page_block_rule(probe, "triton", "bf16")
    if rule is None or probe.fits is None:
        print(path, ": no page-block rule or no fitted section")
        return
    blocks = page_blocks_of(rule.sm_count, rule.tune)
    base = msgspec.structs.replace(probe.fits.kv_dtypes["bf16"]["triton"].decode_dup, surface=None,
                                   program_token_s=0.0)
    fl, l2 = probe.ceilings.bf16_matmul_flop_per_s, probe.l2_bytes
    rows = probe.select("triton", "decode_shared", None, "bf16")
    parts = {}
    for name, sel in (("train", [r for r in rows if not is_held_out(r.config)]),
                      ("held", [r for r in rows if is_held_out(r.config)])):
        f = features("decode_shared", [r.config for r in sel], "kv_head", "q_head", blocks)
        lt = np.array([longest_program_tokens(c.group_size * c.n_groups, c.num_kv_heads, c.q_per_kv, c.group_size,
                                              c.prefix_tokens, c.prefix_tokens + c.suffix_tokens, blocks.sm_count,
                                              blocks.tune) for c in (r.config for r in sel)], float)
        parts[name] = (sel, f, np.array([r.timed_s for r in sel]), lt)
    _, f, t, lt = parts["train"]
    held, fh, th, lth = parts["held"]
    fit = fit_l2(base, f, t, l2, fl)
    with_surface = msgspec.structs.replace(fit, surface=surface_doc(fit_surface(fit, f, t, l2)))

    def candidate(p, f, lt):
        hit, l2_rate, flop_rate, tau = 1 / (1 + np.exp(-p[0])), np.exp(p[1]), np.exp(p[2]), np.exp(p[3])
        bound = np.maximum(np.maximum((f.bytes - hit * f.redundant_bytes) / base.bw_bytes_per_s, f.flops / flop_rate),
                           f.bytes / l2_rate)
        return base.overhead_s + base.row_s * f.rows + base.q_row_s * f.q_rows + bound + lt * tau

    starts = [np.array([h, np.log(r), np.log(0.3 * fl), np.log(tau)]) for h in (-2.0, 0.0, 2.0) for r in (5e12, 1e13)
              for tau in (1e-9, 2e-8)]
    p = min((_lm(lambda x: np.log(candidate(x, f, lt)) - np.log(t), s) for s in starts), key=lambda e: e[1])[0]
    print(f"{path}: {len(t)} training rows, {len(th)} held out")
    print(f"  planner's fit, no surface   held out {ape(predict(fit, fh, l2), th)}")
    print(f"  planner's fit, its surface  held out {ape(predict(with_surface, fh, l2), th)}")
    print(f"  candidate, no surface       held out {ape(candidate(p, fh, lth), th)}")
    print(f"  candidate's parameters: HBM share of re-reads spared {1 / (1 + np.exp(-p[0])):.2f}, L2 "
          f"{np.exp(p[1]) / 1e12:.2f} TB/s, {np.exp(p[2]) / 1e12:.0f} TFLOP/s, {np.exp(p[3]) * 1e9:.1f} ns per token "
          f"of the longest program")
    worst = sorted(zip(held, candidate(p, fh, lth), lth), key=lambda x: -abs(x[1] / x[0].timed_s - 1))[:6]
    for r, pred, longest in worst:
        c = r.config
        shape = f"P={c.prefix_tokens} n={c.group_size}x{c.n_groups} S={c.suffix_tokens} G={c.q_per_kv} " \
                f"Hkv={c.num_kv_heads}"
        print(f"    {pred / r.timed_s - 1:+6.0%}  {shape}: {r.timed_s * 1e6:.1f} us measured, "
              f"{pred * 1e6:.1f} predicted, longest program {int(longest)} tokens")


if __name__ == "__main__":
    for a in sys.argv[1:]:
        score(a)
