"""The shape lists that stages of benchmarks/decode_vs_flashinfer.py share: the default, coverage and regimes
grids' decode shapes as the probe builds them, and held-out shapes put first."""

from __future__ import annotations


def held_out_first(held_out: list, rest: list) -> list:
    """A stage's shapes: the held-out ones (no rule was read from them) first, then `rest` without them."""
    return held_out + [c for c in rest if c not in held_out]


def grid_and_regimes_configs():
    """The coverage grid (the default probe's and its extra rows) and the regimes grid (kernels_probe.attention.grid),
    for --only-changed to pick the shapes a stage's variants launch differently: for head_split_variants 256
    sequences x 8 KV heads at 1K + 4K and 64 groups of 16 at 512 + 1K, for wide_dot_variants the 18 of 12 and 16
    query heads per KV head."""
    from kernels_probe.attention.grid import build_grid, regimes_grid

    cfgs, _ = build_grid(coverage=True)
    return list(cfgs) + [c for c in regimes_grid() if c not in cfgs]


def shape_key(c) -> tuple:
    """A configuration as LOSER_SHAPES_1_11 names it."""
    return (c.prefix_tokens, c.group_size, c.n_groups, c.suffix_tokens, c.q_per_kv, c.num_kv_heads, c.head_dim,
            c.kv_dtype)


def regimes_configs():
    """The regimes grid (kernels_probe.attention.grid.regimes_grid: head dims 64 and 256, groups 6, 7 and 12, 1,024
    sequences, 128K-256K prefixes, 8K suffixes), for the decodes alone: the probe's `--grid regimes` times every
    backend's cascade too."""
    from kernels_probe.attention.grid import regimes_grid

    return regimes_grid()


def default_grid_configs():
    """The default grid (kernels_probe.attention.grid.build_grid: the probe a user runs without options), for the
    decodes alone: the probe times every backend's cascade too."""
    from kernels_probe.attention.grid import build_grid

    return list(build_grid()[0])


def coverage_configs():
    """The coverage grid (kernels_probe.attention.grid.coverage_grid: what the default grid lacks, the breakeven and
    the corners: 12-16 query heads per KV head among them), for the decodes alone: the probe's `--grid coverage`
    times every backend's cascade too."""
    from kernels_probe.attention.grid import coverage_grid

    return coverage_grid()
