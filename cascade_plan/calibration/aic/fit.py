"""Fit the planner's parameters to AIConfigurator's measured tables (pure numpy, SI units).

Inputs are the tables' columns as numpy arrays (aic_tables.Table.columns); latencies there are in
milliseconds. What each table gives:

- generation (decode) attention, one layer, every sequence with its own KV pages: the per-sequence
  decode kernel over duplicated pages, fitted with the same model and code as our probe's rows;
- GEMMs by (m, n, k) and dtype: the ratio of measured time to the roofline over (M, weight bytes),
  StepParts' GemmEfficiency; also the best streaming rate and matmul rate they reach;
- MoE layers by tokens, hidden/intermediate size, experts: the same ratio for the expert GEMMs, against
  the bytes of the experts the batch touches under uniform routing;
- all-reduce by GPU count and message size (in elements): the measured curve per GPU count, a table;
- MLA decode modules (DeepSeek-V3 shape): attention time = module time minus its smallest-context time
  at the same batch (the projections it includes do not grow with the context).
"""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.calibration.fitting import Features, features, fit_kernel, fit_surface, predict, surface_doc
from cascade_plan.calibration_schema.kernel_fit import KernelFit
from cascade_plan.cost.step_parts import AllReduceFit, GemmEfficiency, GemmShapeTable, gemm_time_s
from cascade_plan.cost.surface import Surface

MS = 1e-3
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
EL_BYTES = {"bf16": 2.0, "fp8": 1.0}
HEAD_DIM = 128                      # the head size of every GQA preset the planner ships
MLA_LATENT = 576                    # kv_lora_rank 512 + rope 64, DeepSeek-V3
MLA_V_DIM = 512


def most_common(values: np.ndarray) -> str:
    u, n = np.unique(values, return_counts=True)
    return str(u[np.argmax(n)])


# ---- decode attention -------------------------------------------------------------------------

def decode_rows(cols: dict, kv_dtype: str) -> tuple[list[dict], np.ndarray, str]:
    """Probe-style configurations and times (s) of the GQA decode rows for one KV dtype, head dim 128,
    full attention (no sliding window), with the table's most common kernel. Context = isl + step."""
    aic_kv = {v: k for k, v in KV_DTYPES.items()}[kv_dtype]
    base = (cols["head_dim"] == HEAD_DIM) & (cols["window_size"] == 0) & (cols["beam_width"] == 1)
    base &= cols["num_heads"] % cols["num_key_value_heads"] == 0
    if not base.any():
        return [], np.zeros(0), ""
    kernel = most_common(cols["kernel_source"][base])
    sel = base & (cols["kernel_source"] == kernel) & (cols["kv_cache_dtype"] == aic_kv) & (cols["latency"] > 0)
    idx = np.flatnonzero(sel)
    cfgs = [{"prefix_tokens": int(cols["isl"][i] + cols["step"][i]), "group_size": 1,
             "n_groups": int(cols["batch_size"][i]), "suffix_tokens": 0,
             "q_per_kv": int(cols["num_heads"][i] // cols["num_key_value_heads"][i]),
             "num_kv_heads": int(cols["num_key_value_heads"][i]), "head_dim": HEAD_DIM, "kv_dtype": kv_dtype}
            for i in idx]
    return cfgs, cols["latency"][idx] * MS, kernel


# AIConfigurator's decode tables are dense (13,540 rows on the H200 against the probe's few hundred), so
# the efficiency surface can follow them on a finer grid than the probe's default (9 nodes, 0.3 decades):
# on the H200 the fit's median error on its own rows falls from 4.1% to 3.1%, and against AIConfigurator's
# own estimate on the 180-configuration grid (aic-check) attention from 4.9% to 3.5% median.
SURFACE_NODES, SURFACE_DECADES = 17, 0.15


def fit_decode(cfgs: list[dict], t: np.ndarray, bw_ceiling: float, flop_ceiling: float) -> KernelFit:
    """The per-sequence decode kernel over private pages (the probe's `decode_dup`), fitted as the
    probe's rows are: fixed costs, rates, latency, and the efficiency surface (finer: SURFACE_NODES)."""
    f = features("decode_dup", cfgs)
    fit = fit_kernel(f, t, bw_ceiling, flop_ceiling)
    surface = no_faster_than_measured(fit_surface(fit, f, t, nodes=SURFACE_NODES, bandwidth_decades=SURFACE_DECADES),
                                      fit, f, t)
    surface = Surface(surface.log_bytes, surface.log_rows,        # log corrections: 4 digits are plenty
                      tuple(tuple(float(f"{v:.4g}") for v in row) for row in surface.values))
    fit = msgspec.structs.replace(fit, surface=surface_doc(surface))
    return msgspec.structs.replace(fit, train_median_ape=median_ape(fit, f, t))


def no_faster_than_measured(surface: Surface, fit: KernelFit, f: Features, t: np.ndarray) -> Surface:
    """Raise the correction wherever the whole predicted time (fixed costs + corrected bytes term) of a
    bandwidth-bound layer at that node would stream faster than the best effective bandwidth the table
    measured. Without it the H200 fit streamed 29 GB per layer (beyond the table's 10 GB) at 5.2 TB/s,
    above the 4.8 TB/s datasheet peak: its per-row cost and the surface's edge value pull opposite ways
    outside the data."""
    best = float(np.max(f.bytes / t))
    q_per_row = float(np.median(f.q_rows / f.rows))
    vals = []
    for i, (lb, row) in enumerate(zip(surface.log_bytes, surface.values)):
        b = 10.0 ** lb
        edge = i == len(surface.log_bytes) - 1      # also applies to every larger layer: fixed costs vanish there
        out = []
        for lr, v in zip(surface.log_rows, row):
            r = 10.0 ** lr
            fixed = 0.0 if edge else fit.overhead_s + fit.row_s * r + fit.q_row_s * q_per_row * r
            need = b / best - fixed
            out.append(max(v, float(np.log(need * fit.bw_bytes_per_s / b))) if need > 0 else v)
        vals.append(tuple(out))
    return Surface(surface.log_bytes, surface.log_rows, tuple(vals))


def launch_floor_s(cols: dict) -> float:
    """The smallest decode time in the table (one sequence, a few tokens): the GPU's launch floor."""
    ok = (cols["latency"] > 0) & (cols["batch_size"] == cols["batch_size"].min())
    return float(np.median(np.sort(cols["latency"][ok])[:8])) * MS


# ---- GEMMs and MoE --------------------------------------------------------------------------------

def _ratio_table(m: np.ndarray, w_bytes: np.ndarray, ratio: np.ndarray, dtype: str) -> GemmEfficiency:
    """Median ratio per (power-of-two M, power-of-two weight bytes) cell; empty cells take the nearest
    filled cell of the same M row."""
    lm, lw = np.round(np.log2(m)), np.round(np.log2(w_bytes))
    gm, gw = np.unique(lm), np.unique(lw)
    table = np.full((gm.size, gw.size), np.nan)
    for i, a in enumerate(gm):
        for j, b in enumerate(gw):
            cell = ratio[(lm == a) & (lw == b)]
            if cell.size:
                table[i, j] = np.median(cell)
    for i in range(gm.size):
        have = np.flatnonzero(np.isfinite(table[i]))
        for j in np.flatnonzero(~np.isfinite(table[i])):
            table[i, j] = table[i, have[np.argmin(np.abs(have - j))]]
    return GemmEfficiency(dtype=dtype, log2_m=tuple(map(float, gm)), log2_weight_bytes=tuple(map(float, gw)),
                          ratio=tuple(tuple(float(x) for x in row) for row in table))


UNIT = GemmEfficiency(dtype="unit", log2_m=(0.0,), log2_weight_bytes=(0.0,), ratio=((1.0,),))


def gemm_rows(cols: dict, aic_dtype: str) -> dict[str, np.ndarray]:
    """One dtype's GEMM rows at power-of-two M (the table also has M = 2^k + 1 probes of tile edges)."""
    m = cols["m"].astype(float)
    sel = (cols["gemm_dtype"] == aic_dtype) & (cols["latency"] > 0) & (np.log2(m) % 1 == 0)
    return {k: cols[k][sel].astype(float) for k in ("m", "n", "k")} | {"t": cols["latency"][sel] * MS}


def gemm_efficiency(rows: dict[str, np.ndarray], dtype: str, hbm_bytes_per_s: float,
                    flop_per_s: float) -> GemmEfficiency:
    el = EL_BYTES[dtype]
    roof = gemm_time_s(UNIT, rows["m"], rows["n"], rows["k"], el, hbm_bytes_per_s, flop_per_s)
    return _ratio_table(rows["m"], rows["n"] * rows["k"] * el, rows["t"] / roof, dtype)


SHAPE_MIN_DIM = 256          # N, K kept per shape: every decode GEMM of the shipped presets at TP <= 8
SHAPE_MAX_M = 8192           # tokens per decode step beyond this are not a decode


def gemm_shape_table(rows: dict[str, np.ndarray], dtype: str, hbm_bytes_per_s: float, flop_per_s: float,
                     fallback: GemmEfficiency) -> GemmShapeTable:
    """The measured GEMMs kept per (M, N, K): time over the same roofline `gemm_time_s` multiplies, on the
    table's grid of power-of-two M <= 8192 and N, K >= 256 (AIConfigurator's `gemm_perf` is a full grid:
    74 M x 22 N x 22 K, `torch.nn.functional.linear`). A grid point the table lacks takes the
    (M, weight bytes) ratio table's value there. Ratios to 4 significant digits (the files stay small)."""
    el = EL_BYTES[dtype]
    keep = (rows["m"] <= SHAPE_MAX_M) & (rows["n"] >= SHAPE_MIN_DIM) & (rows["k"] >= SHAPE_MIN_DIM)
    m, n, k, t = (rows[c][keep] for c in ("m", "n", "k", "t"))
    gm, gn, gk = np.unique(m), np.unique(n), np.unique(k)
    roof = gemm_time_s(UNIT, m, n, k, el, hbm_bytes_per_s, flop_per_s)
    r = np.full((gm.size, gn.size, gk.size), np.nan)
    r[np.searchsorted(gm, m), np.searchsorted(gn, n), np.searchsorted(gk, k)] = t / roof
    for i, j, q in zip(*np.nonzero(~np.isfinite(r))):
        r[i, j, q] = float(fallback.ratio_at(gm[i], gn[j] * gk[q] * el))
    return GemmShapeTable(dtype=dtype, log2_m=tuple(map(float, np.log2(gm))), log2_n=tuple(map(float, np.log2(gn))),
                          log2_k=tuple(map(float, np.log2(gk))),
                          ratio=tuple(tuple(tuple(float(f"{x:.4g}") for x in row) for row in plane) for plane in r))


def gemm_ceilings(rows: dict[str, np.ndarray], dtype: str) -> dict[str, float]:
    """The best streaming rate (weight bytes / time at M <= 16 over weights >= 32 MiB) and the typical
    large-GEMM rate: the median over M, N, K >= 4096 (single table points scatter by +-10%; on the H200
    they span 622-891 TFLOP/s, so neither the best nor one shape is representative)."""
    w = rows["n"] * rows["k"] * EL_BYTES[dtype]
    small = (rows["m"] <= 16) & (w >= 32 * 2**20)
    bw = float(np.max(w[small] / rows["t"][small])) if small.any() else float("nan")
    rate = 2 * rows["m"] * rows["n"] * rows["k"] / rows["t"]
    big = (rows["m"] >= 4096) & (rows["n"] >= 4096) & (rows["k"] >= 4096)
    return {"stream_bytes_per_s": bw, "matmul_flop_per_s": float(np.median(rate[big]) if big.any() else np.max(rate))}


def moe_efficiency(cols: dict, aic_dtype: str, dtype: str, hbm_bytes_per_s: float,
                   flop_per_s: float) -> tuple[GemmEfficiency, int] | None:
    """Expert GEMMs of one MoE layer (gate/up and down of every expert the batch touches), single GPU
    (no expert or tensor parallelism), balanced routing (or, where a table has none, the flattest power
    law it has): measured / roofline over (tokens, touched bytes)."""
    dists = sorted(set(cols["distribution"].tolist()), key=lambda d: (d != "balanced", d))
    if not dists:
        return None
    sel = ((cols["moe_dtype"] == aic_dtype) & (cols["moe_tp_size"] == 1) & (cols["moe_ep_size"] == 1)
           & (cols["distribution"] == dists[0]) & (cols["latency"] > 0))
    if not sel.any():
        return None
    tok, h, i_, k, e = (cols[c][sel].astype(float)
                        for c in ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts"))
    t = cols["latency"][sel] * MS
    touched = e * (1.0 - (1.0 - k / e) ** tok)
    el = EL_BYTES[dtype]
    w_bytes = touched * 3.0 * h * i_ * el
    bytes_ = w_bytes + tok * k * (h + i_) * 2.0 * 2.0
    roof = np.maximum(bytes_ / hbm_bytes_per_s, 2.0 * tok * k * 3.0 * h * i_ / flop_per_s)
    return _ratio_table(tok, w_bytes, t / roof, dtype), int(sel.sum())


# ---- all-reduce -----------------------------------------------------------------------------------
#
# `message_size` counts ELEMENTS, not bytes. AIConfigurator's collector (collector/network/
# collect_all_reduce.py, `benchmark_vllm_allreduce` and `benchmark_trtllm_allreduce`) builds a tensor of
# `size` elements of `allreduce_dtype` (`torch.ones(get_input_shape_and_comm_size(size), dtype=bfloat16)`:
# shape [size // 4096, 4096]) and logs `"message_size": size`; its NCCL/HCCL collectors log
# `"message_size": size // bytes_per_element` under `nccl_dtype`. Its estimator queries both tables at
# tokens x hidden (the step engine's `{"message_size", ps.total * h}`, and the custom all-reduce's
# fallback to NCCL asserts `message_size == 1025 * 4096` for 1025 tokens of hidden 4096). So a row's
# message is message_size x element bytes.
COMM_ELEMENT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "int8": 1.0, "fp8": 1.0}
LINE_SUMMARY_BYTES = 64 * 2**20     # the (latency, rate) summary is fitted over messages up to this


def allreduce_fits(cols: dict, op_filter: np.ndarray, origin_note: str, dtype_col: str) -> dict[int, AllReduceFit]:
    """Per GPU count: the measured curve (message bytes, seconds) as a table, every size the collector
    timed, priced by interpolation in it (AllReduceFit.time_s); plus latency + bytes / rate fitted by
    least squares on relative error over messages up to 64 MiB, kept only as a one-line summary."""
    el = np.array([COMM_ELEMENT_BYTES.get(str(d), 2.0) for d in cols[dtype_col]], float)
    out = {}
    for n in sorted(set(cols["num_gpus"][op_filter].tolist())):
        sel = op_filter & (cols["num_gpus"] == n) & (cols["latency"] > 0) & (cols["message_size"] > 0)
        if sel.sum() < 3:
            continue
        b_all = cols["message_size"][sel].astype(float) * el[sel]
        t_all = cols["latency"][sel] * MS
        sizes = np.unique(b_all)
        times = np.array([np.median(t_all[b_all == x]) for x in sizes])     # duplicate sizes: their median
        line = sizes <= LINE_SUMMARY_BYTES
        b, t = sizes[line], times[line]
        a = np.stack([np.ones_like(b), b], axis=1) / t[:, None]          # rows scaled by 1/t: relative error
        (lat, inv_rate), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
        lat, inv_rate = max(float(lat), 0.0), max(float(inv_rate), 1e-15)
        ape = np.abs((lat + b * inv_rate) / t - 1)
        out[int(n)] = AllReduceFit(
            gpus=int(n), latency_s=lat, bytes_per_s=1.0 / inv_rate, origin="aic",
            basis=f"{origin_note}; message_size read as elements x {el[sel][0]:g} B; measured curve of "
                  f"{sizes.size} messages {sizes[0]:.0f}-{sizes[-1]:.0f} B, interpolated (a line would miss it by "
                  f"{np.median(ape):.1%} median, {np.max(ape):.0%} worst, up to 64 MiB)",
            table_bytes=tuple(float(x) for x in sizes), table_s=tuple(float(x) for x in times))
    return out


# ---- MLA decode -----------------------------------------------------------------------------------

def mla_attention_rows(cols: dict, kv_dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(batch, context, heads, attention time s) of the MLA decode module rows, bf16 projections,
    the most common kernel; the attention time is the module time above its smallest context at the
    same batch and heads (that part is the projections)."""
    aic_kv = {v: k for k, v in KV_DTYPES.items()}[kv_dtype]
    sel = (cols["kv_cache_dtype"] == aic_kv) & (cols["gemm_type"] == "bfloat16") & (cols["latency"] > 0)
    if not sel.any():
        return (np.zeros(0),) * 4
    sel &= cols["kernel_source"] == most_common(cols["kernel_source"][sel])
    b, ctx, h = (cols[c][sel].astype(float) for c in ("batch_size", "step", "num_heads"))
    ctx = ctx + cols["isl"][sel]
    t = cols["latency"][sel] * MS
    out = [[], [], [], []]
    for key in set(zip(b.tolist(), h.tolist())):
        m = (b == key[0]) & (h == key[1])
        base = t[m][np.argmin(ctx[m])]
        keep = m & (ctx > ctx[m].min())
        out[0].append(b[keep]), out[1].append(ctx[keep]), out[2].append(h[keep])
        out[3].append(np.maximum(t[keep] - base, 0.02 * t[keep]))
    return tuple(np.concatenate(x) if x else np.zeros(0) for x in out)


def mla_features(b: np.ndarray, ctx: np.ndarray, heads: np.ndarray, kv_dtype: str) -> Features:
    """One MLA layer in the planner's terms: the latent is the one KV head (rows = sequences), every
    query head reads it (QK over 576, PV over 512)."""
    kvb = MLA_LATENT * EL_BYTES[kv_dtype]
    bytes_ = b * ctx * kvb
    zero = np.zeros_like(b)
    return Features(bytes=bytes_, flops=2.0 * b * ctx * heads * (MLA_LATENT + MLA_V_DIM), rows=b, redundant_bytes=zero,
                    layer_prefix_bytes=zero, size=bytes_, longest_tokens=ctx, q_rows=b * heads, program_tokens=zero)


def fit_mla_decode(b, ctx, heads, t, kv_dtype: str, bw_ceiling: float, flop_ceiling: float) -> KernelFit | None:
    if b.size < 12:
        return None
    f = mla_features(b, ctx, heads, kv_dtype)
    fit = fit_kernel(f, t, bw_ceiling, flop_ceiling)
    fit = msgspec.structs.replace(fit, surface=surface_doc(no_faster_than_measured(fit_surface(fit, f, t), fit, f, t)))
    return msgspec.structs.replace(fit, train_median_ape=median_ape(fit, f, t))


def median_ape(fit: KernelFit, f: Features, t: np.ndarray) -> float:
    return float(np.median(np.abs(predict(fit, f) / t - 1)))


def mla_decode_configs(cols: dict, kv_dtype: str, heads_kept=None) -> tuple[list[dict], np.ndarray, np.ndarray, str]:
    """The MLA decode module rows as the probe's MLA configurations (calibration/mla_fit.py: one request per
    sequence over private pages, `group_size` 1), with each row's module time above its smallest context at
    the same batch and heads (s), and that smallest context's configuration index per row (where the base
    attention time is to be added back); the kernel. Empty where the table has no rows of that dtype."""
    aic_kv = {v: k for k, v in KV_DTYPES.items()}[kv_dtype]
    sel = (cols["kv_cache_dtype"] == aic_kv) & (cols["gemm_type"] == "bfloat16") & (cols["latency"] > 0)
    if heads_kept is not None:
        sel &= np.isin(cols["num_heads"], np.asarray(heads_kept))
    if not sel.any():
        return [], np.zeros(0), np.zeros(0), ""
    kernel = most_common(cols["kernel_source"][sel])
    sel &= cols["kernel_source"] == kernel
    b, h = cols["batch_size"][sel].astype(int), cols["num_heads"][sel].astype(int)
    ctx = (cols["isl"][sel] + cols["step"][sel]).astype(int)
    t = cols["latency"][sel] * MS
    cfgs, above, base_ctx = [], [], []
    for key in sorted(set(zip(b.tolist(), h.tolist()))):
        m = (b == key[0]) & (h == key[1])
        i0 = np.flatnonzero(m)[np.argmin(ctx[m])]
        for i in np.flatnonzero(m & (ctx > ctx[i0])):
            cfgs.append({"prefix_tokens": int(ctx[i]), "group_size": 1, "n_groups": int(b[i]), "suffix_tokens": 0,
                         "num_heads": int(h[i]), "kv_lora_rank": MLA_V_DIM, "qk_rope_head_dim": MLA_LATENT - MLA_V_DIM,
                         "kv_dtype": kv_dtype})
            above.append(max(float(t[i] - t[i0]), 0.0))
            base_ctx.append(int(ctx[i0]))
    return cfgs, np.array(above), np.array(base_ctx, float), kernel


def fit_mla_decode_planner(cfgs: list[dict], t: np.ndarray, bw_ceiling: float, flop_ceiling: float,
                           l2_of: dict) -> KernelFit | None:
    """The per-sequence MLA decode (`decode_mla`) fitted on AIConfigurator's rows with the planner's own MLA
    features (calibration/mla_fit.py, query tiles included, so the planner computes what was fitted), the
    L2 gain over shared pages (which private-page rows cannot show) taken from `l2_of` (the probe's
    transferred decode_mla)."""
    from cascade_plan.calibration.mla_fit import mla_features as planner_mla_features

    if len(cfgs) < 12:
        return None
    f = planner_mla_features("decode_mla", cfgs)
    fit = fit_kernel(f, t, bw_ceiling, flop_ceiling)
    fit = msgspec.structs.replace(fit, surface=surface_doc(no_faster_than_measured(fit_surface(fit, f, t), fit, f, t)))
    fit = msgspec.structs.replace(fit, train_median_ape=median_ape(fit, f, t))
    return msgspec.structs.replace(fit, **{k: l2_of.get(k) or 0.0 for k in ("l2_hit_max", "l2_bytes_per_s")},
                                   l2_window_bytes=l2_of.get("l2_window_bytes"),
                                   l2_measured_up_to_bytes=l2_of.get("l2_measured_up_to_bytes") or 0.0)
