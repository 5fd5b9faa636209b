"""Does the planner's fit form price the Triton decode's page blocks if its features know them? Fits Triton's
per-sequence decode over shared pages from a probe file's rows (probe 1.5+: each row records its launch) the way
`cascade-plan calibrate` does (the decode over private pages first, then the L2 reuse and the correction surface),
once with the plain features and once with block-aware ones: the bytes a block reads once for its sequences taken out
of the streamed and re-read bytes, and the longest program's tokens those of a block's first program (the shared run
once, then each sequence's private tokens). Then a third form built on the launch alone ("launch roofline"): a fixed
cost, plus a soft maximum (a fitted p-norm) of the unique bytes over HBM bandwidth, the bytes the working programs
stream after blocks over a fitted L2 bandwidth, and the longest program's tokens at a fitted latency per token, plus
the split merge's state traffic. Prints train and leave-one-out |error| for each.

Usage: python benchmarks/triton_block_fit.py RUN.json [--kv-dtype bf16|fp8]
e.g. python benchmarks/triton_block_fit.py benchmarks/raw/device-2026-12-05d/default.json"""

import json
import sys

import msgspec
import numpy as np

from cascade_plan.calibration.fitting import (
    Features,
    _lm,
    features,
    fit_kernel,
    fit_l2,
    fit_surface,
    predict,
    surface_doc,
)


def block_reads(c: dict, launch: dict) -> tuple[float, float]:
    """One row's page blocks, from its config and `launch` record: the share of its prefix reads the blocks save
    (the prefix's share read by blocks x (1 - 1 / mean block)), and the longest program's tokens (a block's first
    program: the shared run once, then each sequence's private tokens in its split)."""
    P, S = c["prefix_tokens"], c["suffix_tokens"]
    splits, tps = launch.get("splits", 1), launch.get("tokens_per_split", P + S)
    grouped, block = launch.get("grouped_programs", 0.0), launch.get("mean_block_seqs") or 1.0
    if grouped <= 0 or block <= 1:
        return 0.0, min(tps, P + S)
    covered = min(1.0, grouped * splits * tps / max(P, 1))     # share of the prefix read by blocks
    return covered * (1 - 1 / block), min(tps, P) + block * max(0, min(tps, P + S) - min(tps, P))


def block_aware(f: Features, rows: list[dict]) -> Features:
    """f with each row's page blocks (its `launch` record) applied."""
    b, red, longest = f.bytes.copy(), f.redundant_bytes.copy(), f.longest_tokens.copy()
    for i, r in enumerate(rows):
        c = r["config"]
        saved_share, longest_i = block_reads(c, r.get("launch") or {})
        if saved_share == 0:
            continue
        saved = c["prefix_tokens"] * saved_share * b[i] / (c["prefix_tokens"] + c["suffix_tokens"])
        b[i] -= saved
        red[i] = max(red[i] - saved, 0.0)
        longest[i] = longest_i
    return msgspec.structs.replace(f, bytes=b, redundant_bytes=red, size=b, longest_tokens=longest)


def launch_columns(rows: list[dict], kv_bytes: int) -> np.ndarray:
    """(N, 4) per row: unique bytes (HBM), bytes the working programs stream after blocks (L2), the longest program's
    tokens, and the split merge's partial-state bytes; one layer, all KV heads."""
    out = []
    for r in rows:
        c, launch = r["config"], r.get("launch") or {}
        seqs, heads, P, S = c["group_size"] * c["n_groups"], c["num_kv_heads"], c["prefix_tokens"], c["suffix_tokens"]
        token = 2 * c["head_dim"] * kv_bytes * heads                        # K and V of one token, every KV head
        saved_share, longest = block_reads(c, launch)
        streamed = token * (seqs * (P + S) - seqs * P * saved_share)
        splits = launch.get("splits", 1)
        merge = seqs * heads * c["q_per_kv"] * c["head_dim"] * 4 * splits if splits > 1 else 0.0
        out.append((token * (c["n_groups"] * P + seqs * S), streamed, longest, merge))
    return np.array(out, float)


def launch_roofline(theta: np.ndarray, x: np.ndarray, bw: float) -> np.ndarray:
    fixed, l2_bw, per_token, merge_bw, p = np.exp(np.clip(theta, -60, 60))
    hbm, streamed, longest, merge = x.T
    with np.errstate(over="ignore"):      # a trial exponent the fit then rejects (its residual is not finite)
        core = ((hbm / bw) ** p + (streamed / l2_bw) ** p + (longest * per_token) ** p) ** (1 / p)
    return fixed + core + merge / merge_bw


def fit_launch_roofline(x: np.ndarray, t: np.ndarray, bw: float) -> np.ndarray:
    ends = [_lm(lambda th: np.log(launch_roofline(th, x, bw) / t), np.log([5e-6, l2, 2e-8, 1e12, p]))
            for p in (2.0, 4.0, 8.0) for l2 in (5e12, 8e12)]
    return min(ends, key=lambda e: e[1])[0]


def subset(f: Features, keep: np.ndarray) -> Features:
    return Features(**{k: getattr(f, k)[keep] for k in f.__struct_fields__})


def main(argv: list[str]) -> None:
    doc = json.load(open(argv[0]))
    kv = argv[argv.index("--kv-dtype") + 1] if "--kv-dtype" in argv else "bf16"
    bw, fl = doc["ceilings"]["hbm_read_bytes_per_s"], doc["ceilings"]["bf16_matmul_flop_per_s"]
    l2 = float(doc["device"]["l2_bytes"])

    def rows(kernel: str) -> list[dict]:
        return [m for m in doc["measurements"] if m["backend"] == "triton" and m["kernel"] == kernel
                and m["config"]["kv_dtype"] == kv and not m["config"].get("root_tokens")]

    def xy(rs: list[dict], kernel: str) -> tuple[Features, np.ndarray]:
        return features(kernel, [r["config"] for r in rs], decode_rows="kv_head"), np.array([r["median_s"] for r in rs])

    fd, td = xy(rows("decode_dup"), "decode_dup")
    dup = fit_kernel(fd, td, bw, fl)

    def fit_shared(f: Features, t: np.ndarray):
        s = fit_l2(dup, f, t, l2)
        return msgspec.structs.replace(s, surface=surface_doc(fit_surface(s, f, t, l2)))

    shared = rows("decode_shared")
    print(f"{'features':<16} {'rows':>4} {'train median':>13} {'LOO median':>11} {'LOO p90':>8} {'LOO max':>8}")
    for name, aware in (("plain", False), ("block-aware", True)):
        f, t = xy(shared, "decode_shared")
        if aware:
            f = block_aware(f, shared)
        train = np.abs(predict(fit_shared(f, t), f, l2) / t - 1)
        loo = []
        for i in range(t.size):
            keep = np.ones(t.size, bool)
            keep[i] = False
            one = subset(f, ~keep)
            loo.append(abs(predict(fit_shared(subset(f, keep), t[keep]), one, l2)[0] / t[i] - 1))
        report(name, train, np.array(loo))

    x, t = launch_columns(shared, 1 if kv == "fp8" else 2), np.array([r["median_s"] for r in shared])
    train = np.abs(launch_roofline(fit_launch_roofline(x, t, bw), x, bw) / t - 1)
    loo = []
    for i in range(t.size):
        keep = np.arange(t.size) != i
        loo.append(abs(launch_roofline(fit_launch_roofline(x[keep], t[keep], bw), x[i:i + 1], bw)[0] / t[i] - 1))
    report("launch roofline", train, np.array(loo))


def report(name: str, train: np.ndarray, loo: np.ndarray) -> None:
    print(f"{name:<16} {train.size:>4} {np.median(train):>13.1%} {np.median(loo):>11.1%} "
          f"{np.percentile(loo, 90):>8.1%} {loo.max():>8.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
