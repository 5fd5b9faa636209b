"""Triton's per-sequence decode against FlashInfer's best decode (CUDA cores or tensor cores), row by row, from
probe files: FlashInfer's time over ours (>= 1.0: ours at least as fast), per page layout, with the worst rows.
FlashInfer rows may come from other files of the same GPU (given after --flashinfer-from). A file that
decode_vs_flashinfer.py wrote (a stage's rows: both kernels timed within one call) reads as its "default" variant.
--rows prints every row below 1.0 (--rows all: every row), worst first, with both times and our launch (splits,
tokens per split, block size).
--variant NAME: a decode_vs_flashinfer.py stage's file read as that variant's rows, not "default"'s.
--compare: a stage's file, every variant side by side: per row and page layout FlashInfer's best decode and, per
variant, its ratio and launch (splits x tokens per split), in the file's row order.
--retime-rule-1.7.1: for a file whose every row was timed twice (benchmarks/raw/device-2026-12-06d/
default-retime-all.json.gz), each row's figure as probe 1.7.1 keeps it (the faster round for rows of 100 us or more
and a pass's first row of a configuration, the first round elsewhere).
Usage: python benchmarks/decode_ratio_table.py RUN.json [RUN.json ...] [--rows [all]] [--variant NAME]
           [--retime-rule-1.7.1] [--flashinfer-from FILE ...]
       python benchmarks/decode_ratio_table.py STAGE.json --compare
e.g. python benchmarks/decode_ratio_table.py benchmarks/raw/h200-2026-12-03/{all13,regimes}.json \\
         --flashinfer-from calibrations/h200-probe-2026-12-01.json"""

import gzip
import json
import sys

import numpy as np

DECODES = ("decode_dup", "decode_shared")


def decode_times(rows: list[dict], backend: str) -> dict[tuple[str, str], float]:
    """(config, kernel) -> the backend's fastest decode variant there."""
    out: dict[tuple[str, str], float] = {}
    for m in rows:
        if m["backend"] == backend and m["kernel"] in DECODES:
            k = (json.dumps(m["config"], sort_keys=True), m["kernel"])
            out[k] = min(out.get(k, np.inf), m["median_s"])
    return out


def launches(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(json.dumps(m["config"], sort_keys=True), m["kernel"]): m.get("launch") or {}
            for m in rows if m["backend"] == "triton" and m["kernel"] in DECODES}


def shape_label(c: dict) -> str:
    """A configuration in one line: prefix, sequences, suffix, query heads per KV head, KV heads, head dim, dtype."""
    shape = (f"P={c['prefix_tokens']} n={c['group_size']}x{c['n_groups']} S={c['suffix_tokens']} G={c['q_per_kv']} "
             f"Hkv={c['num_kv_heads']} D={c['head_dim']} {c['kv_dtype']}")
    return f"root={c['root_tokens']} " + shape if c.get("root_tokens") else shape


def row_line(ratio: float, key: tuple[str, str], ours: float, theirs: float, launch: dict) -> str:
    shape = shape_label(json.loads(key[0]))
    splits, tps, blocks = (launch.get(k, "?") for k in ("splits", "tokens_per_split", "page_block_seqs"))
    return (f"{ratio:6.2f}  {key[1].removeprefix('decode_'):<7} {ours * 1e6:9.1f} {theirs * 1e6:9.1f}  "
            f"{splits!s:>4} x {tps!s:<6} blocks {blocks!s:<3} {shape}")


def read_doc(path: str) -> dict:
    """A JSON file as written, plain or gzipped (the raw folders keep large ones as .json.gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def load(path: str, variant: str = "default") -> dict:
    """A probe file (read_doc), or a decode_vs_flashinfer.py stage's file as the probe rows of one of its variants
    (stage_measurements)."""
    doc = read_doc(path)
    return doc if "measurements" in doc else {"measurements": stage_measurements(doc.get("rows") or [], variant)}


STAGE_TABLES = {"shared_table": "decode_shared", "dup_table": "decode_dup"}


def stage_measurements(rows: list[dict], variant: str = "default") -> list[dict]:
    """decode_vs_flashinfer.py's rows as probe measurements: ours (the variant's time and launch) and each of
    FlashInfer's decodes, per page layout."""
    out = []
    for r in rows:
        for table, kernel in STAGE_TABLES.items():
            ours = (r.get("triton") or {}).get(table, {}).get(variant)
            if ours:
                out.append({"backend": "triton", "kernel": kernel, "config": r["config"],
                            "median_s": ours["median_s"], "launch": ours.get("launch")})
            for name, t in ((r.get("flashinfer") or {}).get(table) or {}).items():
                out.append({"backend": "flashinfer", "kernel": kernel, "config": r["config"], "median_s": t,
                            "variant": name})
    return out


def compare_lines(rows: list[dict]) -> list[str]:
    """A stage's rows with every variant side by side (--compare): FlashInfer's best decode over each variant's
    (stage_measurements, decode_times), and each variant's launch, per row and page layout that both timed."""
    names: list[str] = []
    for r in rows:
        for table in STAGE_TABLES:
            names += [n for n in ((r.get("triton") or {}).get(table) or {}) if n not in names]
    measured = {n: stage_measurements(rows, n) for n in names}
    ours = {n: decode_times(m, "triton") for n, m in measured.items()}
    launch = {n: launches(m) for n, m in measured.items()}
    # FlashInfer's rows are the same under every variant; its keys keep the stage's row order
    theirs = decode_times(measured[names[0]], "flashinfer") if names else {}
    out = [f"v{i}: {n}" for i, n in enumerate(names, 1)]
    out.append(f"{'shape':<52} {'pages':<7} {'FI us':>8}  "
               + "  ".join(f"{f'v{i}: ratio, launch':>20}" for i in range(1, len(names) + 1)))
    for key, fi in theirs.items():
        if not any(key in ours[n] for n in names):
            continue
        cells = []
        for n in names:
            la = launch[n].get(key, {})
            splits, tps = la.get("splits", "?"), la.get("tokens_per_split", "?")
            cells.append(f"{fi / ours[n][key]:6.2f} {splits!s:>5} x {tps!s:<6}" if key in ours[n] else f"{'-':>20}")
        out.append(f"{shape_label(json.loads(key[0])):<52} {key[1].removeprefix('decode_'):<7} {fi * 1e6:8.1f}  "
                   + "  ".join(cells))
    return out


def keep_rule_1_7_1(rows: list[dict]) -> None:
    """Rows timed twice everywhere, kept as probe 1.7.1 keeps them: a row neither of 100 us or more (in its first
    round) nor the first its pass timed for its configuration (FlashInfer's backends run a pass of their own) takes
    its first round's median. The runner appends rows in the order it times them."""
    prev, pos = None, 0
    for m in rows:
        key = (json.dumps(m["config"], sort_keys=True), m["backend"].startswith("flashinfer"))
        pos = pos + 1 if key == prev else 0
        prev = key
        first = m.get("first_round_median_s")
        if first is not None and pos > 0 and first < 100e-6:
            m["median_s"] = first


def main(argv: list[str]) -> None:
    if not argv or "-h" in argv or "--help" in argv:
        print(__doc__)
        return
    runs, extra = (argv[:argv.index("--flashinfer-from")], argv[argv.index("--flashinfer-from") + 1:]) \
        if "--flashinfer-from" in argv else (argv, [])
    show = None
    if "--rows" in runs:
        i = runs.index("--rows")
        show = "all" if runs[i + 1:i + 2] == ["all"] else "below"
        runs = runs[:i] + runs[i + (2 if show == "all" else 1):]
    if "--compare" in runs:
        for path in [r for r in runs if r != "--compare"]:
            print("\n".join(compare_lines(read_doc(path).get("rows") or [])))
        return
    variant = "default"
    if "--variant" in runs:
        i = runs.index("--variant")
        variant, runs = runs[i + 1], runs[:i] + runs[i + 2:]
    rule_171 = "--retime-rule-1.7.1" in runs
    runs = [r for r in runs if r != "--retime-rule-1.7.1"]
    rows = [m for f in runs for m in load(f, variant)["measurements"]]
    if rule_171:
        keep_rule_1_7_1(rows)
    ours = decode_times(rows, "triton")
    theirs = decode_times([m for f in extra for m in load(f)["measurements"]] + rows, "flashinfer")
    print(f"{'pages':<11} {'rows':>5} {'median':>7} {'worst':>6} {'>= 1.0':>7}   worst row")
    for kernel in DECODES:
        r = sorted((theirs[k] / t, k[0]) for k, t in ours.items() if k[1] == kernel and k in theirs)
        v = np.array([x for x, _ in r])
        print(f"{kernel.removeprefix('decode_'):<11} {len(v):>5} {np.median(v):>7.2f} {v.min():>6.2f} "
              f"{int((v >= 1.0).sum()):>7}   {r[0][1]}")
    if show:
        lrec = launches(rows)
        print(f"\n{'ratio':>6}  {'pages':<7} {'ours us':>9} {'FI us':>9}  {'launch':<22} shape")
        for ratio, k in sorted((theirs[k] / t, k) for k, t in ours.items() if k in theirs):
            if show == "all" or ratio < 1.0:
                print(row_line(ratio, k, ours[k], theirs[k], lrec.get(k, {})))


if __name__ == "__main__":
    main(sys.argv[1:])
