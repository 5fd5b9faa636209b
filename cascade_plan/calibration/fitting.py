"""Fit the cost model's kernel parameters to probe measurements (pure numpy).

Every measured kernel is one attention layer. Its time is modelled as the planner computes it:

    t = overhead + row_s x rows + max(hbm_bytes / bandwidth, FLOP / FLOP_rate)

with rows = sequences x KV heads and the planner's own byte and FLOP counts (not the probe's), so
that fitted numbers mean the same thing when the planner applies them. Per-sequence decode over
*shared* prefix pages adds an L2 term: hbm_bytes = bytes - hit x redundant re-reads, where hit =
l2_hit_max, falling as window / (one layer's shared prefix bytes) beyond a window only where the
measurements show such a fall (see fit_l2). Fitting minimises squared log error
(relative error) with Levenberg-Marquardt from several starts.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from cascade_plan.calibration_schema.attention import AttentionConfigDoc
from cascade_plan.calibration_schema.kernel_fit import BackendFit, KernelFit, SurfaceDoc
from cascade_plan.cost.cost_params import KernelParams
from cascade_plan.cost.ops.attention import overlapped_total
from cascade_plan.cost.ops.attention_work import (
    STATE_BYTES_PER_ELEMENT,
    attention_flops,
    kv_read_bytes,
    kv_token_bytes,
    merge_bytes,
    merge_state_bytes,
    query_token_flops,
)
from cascade_plan.cost.ops.page_blocks import PageBlocks, longest_program, page_blocks_of, saved_tokens
from cascade_plan.cost.ops.prefix_programs import prefix_program
from cascade_plan.cost.ops.tiles import decode_compute_factor, prefix_compute_factor
from cascade_plan.cost.roofline import filled_gain, filled_on
from cascade_plan.cost.surface import Surface

KV_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
STATE_BYTES = STATE_BYTES_PER_ELEMENT   # MLA's fits (calibration/mla_fit.py) read it here

# Configurations as the fits read them: a calibration file's rows, typed (calibration_schema: AttentionConfigDoc,
# MlaConfig), or the plain ones calibration/aic/ builds from AIConfigurator's tables (thousands
# per file, priced at start-up, so not converted).
Configs = Sequence[AttentionConfigDoc] | Sequence[Mapping[str, Any]]


def config_column(configs: Sequence[msgspec.Struct] | Sequence[Mapping[str, Any]], name: str) -> list:
    """One field of every configuration, typed rows and plain mappings alike."""
    if not configs:
        return []
    get: Callable[[Any], Any] = (operator.itemgetter(name) if isinstance(configs[0], Mapping)
                                 else operator.attrgetter(name))
    return [get(c) for c in configs]


class Features(msgspec.Struct, frozen=True):
    """Per-layer work of one measurement, in the planner's terms."""

    bytes: np.ndarray
    flops: np.ndarray
    rows: np.ndarray
    redundant_bytes: np.ndarray       # re-reads of shared prefix a per-sequence kernel makes
    layer_prefix_bytes: np.ndarray    # one layer's shared prefix (L2 working set)
    size: np.ndarray                  # the efficiency surface's size axis: bytes, or for the merge the KV
                                      # bytes whose partial states it combines
    longest_tokens: np.ndarray        # the most KV tokens one (sequence, head) row streams: a kernel that
                                      # does not split them along the sequence is latency-bound by it
    q_rows: np.ndarray                # sequences x query heads (kernels that give each query head its own tile)
    # tokens the launch's busiest program streams where the kernel's page blocks are known (the probe's Triton decode
    # over shared pages: cost/ops/page_blocks.py longest_program), else 0
    program_tokens: np.ndarray | float = 0.0


CONFIG_COLUMNS = ("prefix_tokens", "group_size", "n_groups", "suffix_tokens", "q_per_kv", "num_kv_heads", "head_dim")


def features(kernel: str, configs: Configs | dict[str, np.ndarray], prefix_rows: str = "kv_head",
             decode_rows: str = "q_head", page_blocks: PageBlocks | None = None) -> Features:
    """`configs`: probe configurations (typed rows or plain mappings), or their columns already
    (CONFIG_COLUMNS and "kv_element_bytes", one array each: a caller with thousands of rows need not build a
    dict per row). `prefix_rows`, `decode_rows`: how the backend's prefix pass and per-sequence decode lay out
    query rows (cost/ops/tiles.py PREFIX_ROWS, DECODE_ROWS). `page_blocks`: the rule by which the probe's own
    decode over shared pages reads a block of siblings' pages once (cost/ops/page_blocks.py): those tokens leave
    its bytes, its re-reads and its computed FLOP, and its latency bound streams its longest program's tokens; with
    it, the probe's own prefix pass is known too, and its latency bound is its busiest program's
    (cost/ops/prefix_programs.py)."""
    if isinstance(configs, dict):
        c = {k: np.asarray(configs[k], dtype=float) for k in CONFIG_COLUMNS}
        kv_el = np.asarray(configs["kv_element_bytes"], dtype=float)
    else:
        c = {k: np.array(config_column(configs, k), dtype=float) for k in CONFIG_COLUMNS}
        kv_el = np.array([KV_ELEMENT_BYTES[kv] for kv in config_column(configs, "kv_dtype")], dtype=float)
    # one layer's bytes and FLOP by the planner's own formulas (cost/ops/attention_work.py)
    kvb = kv_token_bytes(c["num_kv_heads"], c["head_dim"] * kv_el)
    hq = c["num_kv_heads"] * c["q_per_kv"]
    f_tok = query_token_flops(hq, c["head_dim"], c["head_dim"])
    seqs = c["group_size"] * c["n_groups"]
    P, S = c["prefix_tokens"], c["suffix_tokens"]
    rows = seqs * c["num_kv_heads"]
    zero = np.zeros_like(P)
    shared = kv_read_bytes(c["n_groups"] * P, kvb)
    if kernel in ("decode_shared", "decode_dup"):
        red = kv_read_bytes(c["n_groups"] * (c["group_size"] - 1) * P, kvb) if kernel == "decode_shared" else zero
        saved = (saved_tokens(page_blocks, seqs, c["num_kv_heads"], c["q_per_kv"], c["group_size"], P, P + S,
                              head_dim=c["head_dim"])
                 if kernel == "decode_shared" and page_blocks is not None else zero)
        b = kv_read_bytes(seqs * (P + S - saved), kvb)
        flops = attention_flops(seqs * (P + S - saved), f_tok, decode_compute_factor(c["q_per_kv"], decode_rows))
        red = np.maximum(red - kv_read_bytes(seqs * saved, kvb), 0.0)
        program = (longest_program(page_blocks, seqs, c["num_kv_heads"], c["q_per_kv"], c["group_size"], P, P + S,
                                   head_dim=c["head_dim"])
                   if kernel == "decode_shared" and page_blocks is not None else zero)
        # the probe's own kernel splits a long row: its latency bound is its longest program's, not the row's
        longest = (longest_program(page_blocks, seqs, c["num_kv_heads"], c["q_per_kv"], c["group_size"],
                                   P if kernel == "decode_shared" else zero, P + S, blocks_only=False,
                                   head_dim=c["head_dim"])
                   if page_blocks is not None else P + S)
        return Features(b, flops, rows, red, shared, kv_read_bytes(seqs * (P + S), kvb), longest, seqs * hq, program)
    if kernel == "cascade_prefix":    # FLOP as computed: whole tiles of each prompt's query rows
        tiles = prefix_compute_factor(c["group_size"], c["q_per_kv"], prefix_rows)
        # the probe's own pass (its launch known): the busiest program's tokens x row tile, else the whole prefix
        longest = prefix_program(page_blocks, c["group_size"], c["q_per_kv"], c["num_kv_heads"], c["n_groups"], P)
        return Features(shared, attention_flops(seqs * P, f_tok, tiles), rows, zero, shared, shared, longest,
                        seqs * hq, zero)
    if kernel == "cascade_suffix":
        b = kv_read_bytes(seqs * S, kvb)
        return Features(b, attention_flops(seqs * S, f_tok), rows, zero, shared, b, S, seqs * hq, zero)
    if kernel == "cascade_merge":
        return Features(merge_bytes(seqs, merge_state_bytes(hq, c["head_dim"])), zero, rows, zero, shared,
                        shared + kv_read_bytes(seqs * S, kvb), P + S, seqs * hq, zero)
    raise ValueError(f"no features for kernel {kernel!r}")


def surface_of(fit: KernelFit) -> Surface | None:
    """A fit's correction surface in the form the planner evaluates (its file form is lists, SurfaceDoc)."""
    s = fit.surface
    return None if s is None else Surface(tuple(s.log_bytes), tuple(s.log_rows), tuple(tuple(r) for r in s.values))


def surface_doc(s: Surface) -> SurfaceDoc:
    """A fitted surface in the form a KernelFit (and the file) holds it."""
    return SurfaceDoc(log_bytes=list(s.log_bytes), log_rows=list(s.log_rows), values=[list(r) for r in s.values])


def roofline_part(fit: KernelFit, f: Features, l2_bytes: float = 0.0) -> np.ndarray:
    t = np.maximum(f.flops / fit.flop_per_s, f.longest_tokens * fit.token_latency_s)
    hbm = f.bytes
    if fit.l2_hit_max:
        window = fit.l2_window_bytes or np.inf     # None (or 0): no fall, as the planner applies it
        hit = fit.l2_hit_max * np.minimum(1.0, window / np.maximum(f.layer_prefix_bytes, 1.0))
        hbm = f.bytes - hit * f.redundant_bytes
    t = np.maximum(t, hbm / fit.bw_bytes_per_s) / filled_gain(fit, f.rows, f.longest_tokens)
    # bytes served from L2 still stream through it, at its own rate, whatever the launch
    t = np.maximum(t, f.bytes / fit.l2_bytes_per_s) if fit.l2_hit_max else t
    # the busiest program's own streaming adds to the bounds: a page block's first program reads the shared run,
    # then each of its sequences' private tokens alone (page_blocks.longest_program)
    return t + f.program_tokens * fit.program_token_s


def predict(fit: KernelFit, f: Features, l2_bytes: float = 0.0) -> np.ndarray:
    surface = surface_of(fit)
    corr = np.exp(surface(f.size, f.rows)) if surface else 1.0
    return fit.overhead_s + fit.row_s * f.rows + fit.q_row_s * f.q_rows + roofline_part(fit, f, l2_bytes) * corr


def fit_surface(fit: KernelFit, f: Features, measured_s: np.ndarray, l2_bytes: float = 0.0,
                bandwidth_decades: float = 0.3, nodes: int = 9) -> Surface:
    """Kernel-regression of the log residual of the roofline part onto a regular grid spanning the
    training points (Gaussian weights in log10 space, shrunk towards 0 where data are thin)."""
    base = fit.overhead_s + fit.row_s * f.rows + fit.q_row_s * f.q_rows
    roof = roofline_part(fit, f, l2_bytes)
    r = np.log(np.maximum(np.asarray(measured_s, float) - base, 0.05 * roof) / roof)
    lb, lr = np.log10(np.maximum(f.size, 1.0)), np.log10(np.maximum(f.rows, 1.0))
    gb = np.linspace(lb.min(), lb.max(), nodes) if lb.max() > lb.min() else np.array([lb.min(), lb.min() + 1])
    gr = np.linspace(lr.min(), lr.max(), nodes) if lr.max() > lr.min() else np.array([lr.min(), lr.min() + 1])
    vals = np.zeros((gb.size, gr.size))
    for a, xb in enumerate(gb):
        for b, xr in enumerate(gr):
            w = np.exp(-0.5 * (((lb - xb) ** 2 + (lr - xr) ** 2) / bandwidth_decades**2))
            vals[a, b] = (w @ r) / (w.sum() + 0.5)     # +0.5: a prior weight on "no correction"
    return Surface(tuple(gb.tolist()), tuple(gr.tolist()), tuple(tuple(v) for v in vals.tolist()))


def _lm(resid, theta: np.ndarray, iters: int = 300) -> tuple[np.ndarray, float]:
    """Levenberg-Marquardt with a forward-difference Jacobian; returns (theta, sum of squares)."""
    r = resid(theta)
    cost = float(r @ r)
    lam = 1e-3
    for _ in range(iters):
        eps = 1e-6 * np.maximum(1.0, np.abs(theta))
        jac = np.stack([(resid(theta + e) - r) / h for e, h in zip(np.diag(eps), eps)], axis=1)
        a = jac.T @ jac
        g = jac.T @ r
        improved = False
        while lam < 1e12:
            step = np.linalg.solve(a + lam * (np.diag(np.diag(a)) + 1e-12 * np.eye(len(theta))), -g)
            new = theta + step
            rn = resid(new)
            cn = float(rn @ rn)
            if np.isfinite(cn) and cn < cost:
                rel = (cost - cn) / max(cost, 1e-300)
                theta, r, cost, lam, improved = new, rn, cn, max(lam * 0.3, 1e-9), True
                break
            lam *= 10
        if not improved or rel < 1e-12:
            break
    return theta, cost


TIE_REL = 1e-9     # fits whose squared error is this close to the best one are the same fit to the data


def _least_latency(ends: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """The parameters of the best fit; among fits that tie with it, the one with the smallest token latency. A
    latency bound that binds on no training row leaves their error unchanged, so the starts end anywhere along it
    and floating-point noise picked one (a library version moved it 1e-12 -> 9e-10 s per token); the rows hold no
    evidence for the bound, so it stays at its floor, and the fit no longer depends on the machine running it."""
    cost = min(c for _, c in ends)
    ties = [th for th, c in ends if c <= cost * (1 + TIE_REL) + 1e-300]
    return min(ties, key=lambda th: (th[5], th[1], th[2]))    # token latency, then the per-row costs


# A batch-filled launch's gain (cost/roofline.py filled_gain) is fitted only with this many training rows on each side
# of it, and kept only where it cuts the fit's squared log error by this fraction; the launch's whole tiles are the
# kernel's either way (gain 1: no faster, but a row's last tile costs a whole one).
FILLED_MIN_ROWS = 3
FILLED_MIN_GAIN = 0.2


def fit_kernel(f: Features, measured_s: np.ndarray, bw_ceiling: float, flop_ceiling: float,
               filled: tuple[int, int, int] | None = None) -> KernelFit:
    """Fit overhead, per-row cost, bandwidth and FLOP rate to one kernel kind's measurements; and, where the kernel
    takes a launch of its own once the batch fills the GPU (`filled`: its (sequence, KV head) rows per layer, the
    tokens a row must exceed and its tile's tokens: launch_rules.filled_launch), that launch's gain, where the rows
    show it (1.0 where they do not: the fit still carries the launch's rule, whose rows stream whole tiles)."""
    t = np.asarray(measured_s, float)
    tiny = 1e-15
    # the launch rule alone, in the form filled_on / filled_gain read (no rates: those are what is fitted)
    rule = (KernelParams(filled_rows=filled[0], filled_min_tokens=filled[1], filled_tile_tokens=filled[2])
            if filled else None)
    on = np.zeros(t.size, bool) if rule is None else filled_on(rule, f.rows, f.longest_tokens)

    def unpack(th):
        return tuple(np.exp(np.clip(th, -80, 80)))

    def resid(th):
        o, c, cq, bw, fl, tau = unpack(th[:6])
        roof = np.maximum(np.maximum(f.bytes / bw, f.flops / fl), f.longest_tokens * tau)
        if len(th) > 6:
            roof = roof / filled_gain(rule, f.rows, f.longest_tokens, gain=float(np.exp(np.clip(th[6], -3, 3))))
        return np.log(np.maximum(o + c * f.rows + cq * f.q_rows + roof, tiny)) - np.log(t)

    def best_of(extra: list[float]) -> tuple[np.ndarray, float]:
        ends: list[tuple[np.ndarray, float]] = []
        # Starts span compute-starved kernels (a FLOP rate far below peak: tiles mostly empty) too.
        for c0, cq0 in ((1e-10, 1e-12), (1e-8, 1e-12), (1e-12, 1e-8)):
            for b0 in (0.5, 0.9):
                for f0 in (0.003, 0.3):
                    for tau0 in (1e-12, 1e-8):
                        th0 = np.log([max(0.5 * t.min(), 1e-9), c0, cq0, b0 * bw_ceiling, f0 * flop_ceiling, tau0])
                        ends.append(_lm(resid, np.array([*th0, *extra])))
        best = _least_latency(ends)
        return best, float(resid(best) @ resid(best))

    best, cost = best_of([])
    gain = 1.0
    if filled is not None and min(on.sum(), (~on).sum()) >= FILLED_MIN_ROWS:
        best_f, cost_f = best_of([0.0])
        if cost_f < (1 - FILLED_MIN_GAIN) * cost:
            best, gain = best_f, float(np.exp(np.clip(best_f[6], -3, 3)))
    o, c, cq, bw, fl, tau = unpack(best[:6])
    ape = np.abs(np.exp(resid(best)) - 1)
    rows, tokens, tile = filled if filled is not None else (0, 0, 0)
    return KernelFit(bw_bytes_per_s=float(bw), flop_per_s=float(fl), overhead_s=float(o), row_s=float(c),
                     q_row_s=float(cq), token_latency_s=float(tau), n_train=int(t.size),
                     train_median_ape=float(np.median(ape)), filled_rows=int(rows), filled_min_tokens=int(tokens),
                     filled_tile_tokens=int(tile), filled_gain=gain)


# A window (the per-layer shared prefix beyond which hits fall) is kept only when the data show the
# fall: it must lie inside the measured range and cut the squared log error by this fraction.
L2_WINDOW_MIN_GAIN = 0.05


def fit_l2(base: KernelFit, f: Features, measured_s: np.ndarray, l2_bytes: float,
           flop_ceiling: float | None = None) -> KernelFit:
    """With the kernel's own parameters fixed (from duplicated pages), fit how it re-reads shared
    prefix pages: the share served by L2, the rate at which all the bytes a sequence reads still
    stream through L2, and, only where the measurements show it, the per-layer shared prefix beyond
    which that share falls (`l2_window_bytes`; None = no fall within the measured range, which
    `l2_measured_up_to_bytes` records).

    A window beyond every measured point leaves the residual unchanged, so a fit that includes it
    stops wherever it started (the shipped H200 file had e^3 x L2 = 1.26 GB that way). Hence two
    fits: without a window, and with one started inside the data; the window is kept only if it lands
    inside the measured range and clearly improves the fit.

    `flop_ceiling`: the FLOP rate is fitted too, between the base's and this ceiling (the GPU's measured matmul
    peak). Where page blocks put several sequences' query rows into one dot (cost/ops/page_blocks.py), a row
    computes more per byte than any duplicated-pages row, whose FLOP rate only had to stay clear of their bytes'
    time.

    Where the features carry the busiest program's tokens (page blocks known: Features.program_tokens), its time per
    token (`program_token_s`) is fitted too: a block's first program streams the shared run and then each of its
    sequences' private tokens alone, which the bandwidth bounds do not see (on probe 1.6.0's and 1.7.0's H100 rows it
    took the held-out p90 of this fit from ~30% to ~19%: benchmarks/shared_decode_program_latency.py)."""
    t = np.asarray(measured_s, float)
    reread = f.redundant_bytes > 0
    largest = float(f.layer_prefix_bytes[reread].max()) if reread.any() else 0.0
    flop = 1 if flop_ceiling and flop_ceiling > base.flop_per_s else 0
    prog = 1 if np.any(np.asarray(f.program_tokens) > 0) else 0
    lead = flop + prog

    def unpack(th):
        fl = (base.flop_per_s + (flop_ceiling - base.flop_per_s) / (1.0 + np.exp(-np.clip(th[0], -40, 40)))
              if flop and flop_ceiling else base.flop_per_s)
        tau = float(np.exp(np.clip(th[flop], -60, 0))) if prog else 0.0
        h = 1.0 / (1.0 + np.exp(-np.clip(th[lead], -40, 40)))
        bl2 = base.bw_bytes_per_s * (1.0 + np.exp(np.clip(th[lead + 1], -20, 20)))
        w = l2_bytes * np.exp(np.clip(th[lead + 2], -20, 20)) if len(th) > lead + 2 else None
        return h, bl2, w, fl, tau

    def candidate(th) -> KernelFit:
        h, bl2, w, fl, tau = unpack(th)
        # no window: hits never fall (np.inf); KernelFit stores that as None
        return msgspec.structs.replace(base, l2_hit_max=float(h), l2_bytes_per_s=float(bl2), flop_per_s=float(fl),
                                       l2_window_bytes=np.inf if w is None else float(w), program_token_s=tau)

    def resid(th):
        return np.log(predict(candidate(th), f, l2_bytes)) - np.log(t)

    flop_starts = [(-4.0,), (0.0,)] if flop else [()]
    prog_starts = [(float(np.log(1e-9)),), (float(np.log(2e-8)),)] if prog else [()]
    starts = [(*x, *y, a, c) for x in flop_starts for y in prog_starts for a in (-2.0, 1.0, 3.0) for c in (0.0, 1.5)]
    flat = min((_lm(resid, np.array(s0)) for s0 in starts), key=lambda p: p[1])
    best = flat
    if largest > 0:
        inside = [np.log(w0 / l2_bytes) for w0 in (l2_bytes, 0.5 * largest) if w0 < largest]
        windowed = min((_lm(resid, np.array([*s0, w0])) for s0 in starts for w0 in inside),
                       key=lambda p: p[1], default=None)
        if (windowed is not None and unpack(windowed[0])[2] < largest
                and windowed[1] < (1 - L2_WINDOW_MIN_GAIN) * flat[1]):
            best = windowed
    fit = candidate(best[0])
    ape = np.abs(np.exp(resid(best[0])) - 1)
    window = fit.l2_window_bytes
    return msgspec.structs.replace(fit, l2_window_bytes=None if window is None or np.isinf(window) else window,
                                   l2_measured_up_to_bytes=largest, n_train=int(t.size),
                                   train_median_ape=float(np.median(ape)))


def fixed_part(fit: KernelFit, f: Features) -> np.ndarray:
    return fit.overhead_s + fit.row_s * f.rows + fit.q_row_s * f.q_rows


def fit_merge_overlap(f: Features, t_total, t_pre, t_suf, roof_pre, roof_suf, bw: float,
                      flop_rate: float) -> tuple[KernelFit, float]:
    """The merge's fixed costs and how much the prefix and suffix passes overlap, from whole-cascade
    times and the two passes timed alone."""
    t_total, t_pre, t_suf = (np.asarray(x, float) for x in (t_total, t_pre, t_suf))

    def unpack(th):
        o, c, cq, tau = np.exp(np.clip(th[:4], -80, 80))
        return o, c, cq, tau, 1.0 / (1.0 + np.exp(-np.clip(th[4], -40, 40)))

    def resid(th):
        o, c, cq, tau, k = unpack(th)
        # the merge's own time: fixed costs, and the partial states it combines, which grow with the
        # tokens split across programs (the latency term); its bytes are small
        merge = o + c * f.rows + cq * f.q_rows + np.maximum(f.bytes / bw, tau * f.longest_tokens)
        pred = overlapped_total(t_pre, t_suf, roof_pre, roof_suf, k) + merge
        return np.log(np.maximum(pred, 1e-15)) - np.log(t_total)

    starts = [np.log([max(0.2 * t_total.min(), 1e-9), c0, 1e-12, tau0]).tolist() + [k0]
              for c0 in (1e-11, 1e-8) for tau0 in (1e-13, 1e-10) for k0 in (-3.0, 0.0, 3.0)]
    th, _ = min((_lm(resid, np.array(s0)) for s0 in starts), key=lambda p: p[1])
    o, c, cq, tau, k = unpack(th)
    ape = np.abs(np.exp(resid(th)) - 1)
    fit = KernelFit(bw_bytes_per_s=bw, flop_per_s=flop_rate, overhead_s=float(o), row_s=float(c), q_row_s=float(cq),
                    token_latency_s=float(tau), n_train=int(t_total.size), train_median_ape=float(np.median(ape)))
    return fit, float(k)


def predict_kind(fits: BackendFit, kind: str, cfgs: Configs, l2: float) -> np.ndarray:
    """One kernel kind's fitted time at probe configurations, as the planner computes it; kind is a
    fitted kind (decode_shared, decode_dup, prefix, suffix, merge) or cascade_total (the passes, their
    overlap and the merge). `fits`: one backend's fitted section."""
    rule = page_blocks_of(fits.page_blocks.sm_count, fits.page_blocks.tune) if fits.page_blocks else None
    if kind == "cascade_total":
        pre_fit, suf_fit = fits.prefix, fits.suffix
        fp, fs = features("cascade_prefix", cfgs, fits.prefix_rows, page_blocks=rule), features("cascade_suffix", cfgs)
        has_suffix = np.array(config_column(cfgs, "suffix_tokens")) > 0
        t_pre, t_suf = predict(pre_fit, fp, l2), np.where(has_suffix, predict(suf_fit, fs, l2), 0.0)
        total = overlapped_total(t_pre, t_suf, t_pre - fixed_part(pre_fit, fp),
                                 np.where(has_suffix, t_suf - fixed_part(suf_fit, fs), 0.0),
                                 fits.prefix_suffix_overlap)
        if fits.merge is not None:
            total = total + predict_kind(fits, "merge", cfgs, l2)
        return total
    feature_kind = {"prefix": "cascade_prefix", "suffix": "cascade_suffix", "merge": "cascade_merge"}.get(kind, kind)
    blocks = rule if kind in ("decode_shared", "decode_dup", "prefix") else None
    return predict(getattr(fits, kind),
                   features(feature_kind, cfgs, fits.prefix_rows, fits.decode_rows, blocks), l2)
