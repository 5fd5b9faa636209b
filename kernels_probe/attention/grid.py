"""The probe's measurement grid: configurations and what each timed row is. Pure Python (no torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

BACKENDS = ("triton", "torch", "flashinfer", "flashinfer-fa2")
# The module that times each probe backend, in the order a configuration's rows are built and timed. A module may
# write rows of several backends (FlashInfer's writes flashinfer-fa2's cascade too). A new backend is one module with
# `timed_kernels(data, *, sm_count, tune) -> BackendKernels` (kernels_probe/attention/timed.py) and one line here.
BACKEND_MODULES = {"triton": "kernels_probe.attention.triton_backend", "torch": "kernels_probe.attention.torch_backend",
                   "flashinfer": "kernels_probe.attention.flashinfer_backend"}
KERNELS = ("decode_shared", "decode_dup", "cascade_prefix", "cascade_suffix", "cascade_merge", "cascade_total")
KV_DTYPES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class AttentionConfig:
    """One attention layer's decode step: n_groups groups of group_size sequences; each group shares a
    prefix of prefix_tokens; each sequence has suffix_tokens private tokens. num_kv_heads KV heads of
    head_dim, q_per_kv (G) query heads per KV head. root_tokens > 0 makes a three-level tree: a root prefix
    (a system prompt) shared by all `batch` sequences, in front of each group's prefix."""

    prefix_tokens: int
    group_size: int
    n_groups: int = 1
    suffix_tokens: int = 128
    q_per_kv: int = 4
    num_kv_heads: int = 8
    head_dim: int = 128
    kv_dtype: str = "bf16"
    page_size: int = 16
    root_tokens: int = 0

    def __post_init__(self):
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {sorted(KV_DTYPES)}, got {self.kv_dtype!r}")
        for name in ("prefix_tokens", "group_size", "n_groups", "q_per_kv", "num_kv_heads", "head_dim", "page_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.suffix_tokens < 0 or self.root_tokens < 0:
            raise ValueError("suffix_tokens and root_tokens must be >= 0")
        if any(t % self.page_size for t in (self.prefix_tokens, self.suffix_tokens, self.root_tokens)):
            raise ValueError("root_tokens, prefix_tokens and suffix_tokens must be multiples of page_size")

    @property
    def batch(self) -> int:
        return self.group_size * self.n_groups

    @property
    def num_q_heads(self) -> int:
        return self.q_per_kv * self.num_kv_heads

    @property
    def kv_elem_bytes(self) -> int:
        return KV_DTYPES[self.kv_dtype]

    @property
    def context_tokens(self) -> int:
        """Tokens each sequence attends to: root + its group's prefix + its suffix."""
        return self.root_tokens + self.prefix_tokens + self.suffix_tokens

    def as_dict(self) -> dict:
        d = asdict(self)
        if not self.root_tokens:  # two-level rows are written as they were before trees existed
            del d["root_tokens"]
        return d

    def label(self) -> str:
        s = (f"P={self.prefix_tokens} n={self.group_size}x{self.n_groups} S={self.suffix_tokens} "
             f"G={self.q_per_kv} Hkv={self.num_kv_heads} {self.kv_dtype}")
        return f"R={self.root_tokens} {s}" if self.root_tokens else s


PREFIX_AXIS = (256, 1024, 4096, 16384, 32768)
GROUP_AXIS = (1, 4, 16, 64, 256)
SUFFIX_AXIS = (0, 128, 1024, 4096)
G_AXIS = (1, 4, 8)


# The coverage grid (probe 1.2): what the full grid lacks, spanning the breakeven and the corners rather than
# the cartesian product. fp8 KV on every backend at the bf16 grid's points plus its corners; query-group
# sizes 1 (MHA, 40 KV heads as CodeLlama-13B), 5, 7 and 16 with realistic KV-head counts; batches 512-1024
# (and 8); a 64K shared prefix. (G, KV heads): 5 as Qwen2.5-14B (40/8), 7 as Qwen2.5-7B (28/4), 16 as 2 KV
# heads of 32 query heads (Llama-3-70B at TP 4).
COVERAGE_G_SHAPES = ((1, 40), (5, 8), (7, 4), (16, 2))
COVERAGE_BATCH_ENDS = (8, 512, 1024)
COVERAGE_LONG_PREFIX = 65536
# (prefix, group size, groups): 1,024 sequences as 64 prompts x 16 samples, 32 x 16, and one group of 1,024
COVERAGE_MANY_SEQS = ((512, 16, 64), (2048, 16, 32), (4096, 1024, 1))


def _collector(page_size: int):
    """A list of distinct configurations and the function that appends one (default page size filled in)."""
    cfgs: list[AttentionConfig] = []

    def add(**kw):
        kw.setdefault("page_size", page_size)
        c = AttentionConfig(**kw)
        if c not in cfgs:
            cfgs.append(c)
    return cfgs, add


def coverage_grid(page_size: int = 16) -> list[AttentionConfig]:
    ps = page_size
    cfgs, add = _collector(ps)

    for p in (1024, 4096, 16384):           # fp8 KV at the bf16 core points (all backends now)
        for n in (4, 64, 256):
            add(prefix_tokens=p, group_size=n, kv_dtype="fp8")
    for p, n in ((256, 64), (4096, 1), (4096, 16), (32768, 16), (4096, 1024), (1024, 512)):
        add(prefix_tokens=p, group_size=n, kv_dtype="fp8")
    for p, n, s in ((4096, 64, 1024), (16384, 16, 4096)):
        add(prefix_tokens=p, group_size=n, suffix_tokens=s, kv_dtype="fp8")
    for g in (1, 8):                        # fp8 with other group widths
        add(prefix_tokens=4096, group_size=64, q_per_kv=g, kv_dtype="fp8")
    add(prefix_tokens=4096, group_size=64, q_per_kv=8, num_kv_heads=1, kv_dtype="fp8")
    for g, hkv in COVERAGE_G_SHAPES:       # query-group sizes
        for p in (1024, 4096, 16384):
            for n in (8, 128):
                add(prefix_tokens=p, group_size=n, q_per_kv=g, num_kv_heads=hkv)
        add(prefix_tokens=4096, group_size=512, q_per_kv=g, num_kv_heads=hkv)
        add(prefix_tokens=4096, group_size=64, q_per_kv=g, num_kv_heads=hkv, kv_dtype="fp8")
    for p in (256, 1024, 4096, 16384):      # batch ends
        for n in COVERAGE_BATCH_ENDS:
            add(prefix_tokens=p, group_size=n)
    add(prefix_tokens=1024, group_size=64, n_groups=16)   # 1024 sequences in 16 groups
    for n in (1, 4, 16, 64, 256):           # 64K shared prefix
        add(prefix_tokens=COVERAGE_LONG_PREFIX, group_size=n)
    for n in (16, 64):
        add(prefix_tokens=COVERAGE_LONG_PREFIX, group_size=n, kv_dtype="fp8")
    add(prefix_tokens=COVERAGE_LONG_PREFIX, group_size=16, suffix_tokens=1024)
    for p, n, ng in COVERAGE_MANY_SEQS:     # many sequences at the start of decode: no suffix page, or one
        for s in (0, 16):
            add(prefix_tokens=p, group_size=n, n_groups=ng, suffix_tokens=s)
    add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=0, kv_dtype="fp8")
    add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=16, q_per_kv=16, num_kv_heads=2)
    return cfgs


# The regimes grid (probe 1.3): where small models, long contexts and long suffixes run. (G, KV heads, head dim):
# head dim 64 as Llama-3.2-1B (32/8) and 256 as Gemma-2-2B (8/4); query groups of 6 (Qwen2.5-1.5B, 12/2) and 12
# (48 query heads over 4 KV heads); prefixes of 128K and 256K; private suffixes of 8K; 1,024 sequences as GRPO's
# 64 prompts x 16 samples on small layers.
REGIME_SHAPES = ((4, 8, 64), (2, 4, 256), (6, 2, 128), (12, 4, 128), (7, 2, 64))
REGIME_LONG_PREFIXES = (131072, 262144)
REGIME_LONG_SUFFIX = 8192


def regimes_grid(page_size: int = 16) -> list[AttentionConfig]:
    cfgs, add = _collector(page_size)
    for g, hkv, d in REGIME_SHAPES:
        shape = {"q_per_kv": g, "num_kv_heads": hkv, "head_dim": d}
        for p in (1024, 4096, 16384):
            for n in (8, 128):
                add(prefix_tokens=p, group_size=n, **shape)
        add(prefix_tokens=4096, group_size=64, kv_dtype="fp8", **shape)
        add(prefix_tokens=1024, group_size=16, n_groups=64, **shape)      # 1,024 sequences, 64 prompts
        add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=1024, **shape)
        add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=0, **shape)     # a rollout's first steps
        add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=16, **shape)
        add(prefix_tokens=2048, group_size=16, n_groups=32, suffix_tokens=16, **shape)
        add(prefix_tokens=2048, group_size=16, n_groups=32, suffix_tokens=512, **shape)
    # fp8 KV at the small model's rollout: its start (no suffix, a 16-token one) and its end (1,024 private tokens),
    # the points its bf16 twins above give the bf16 rollout
    for s in (0, 16, 1024):
        add(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=s, kv_dtype="fp8", q_per_kv=6, num_kv_heads=2)
    for p in REGIME_LONG_PREFIXES:
        for n in ((1, 8, 16, 64) if p == REGIME_LONG_PREFIXES[0] else (1, 8)):
            add(prefix_tokens=p, group_size=n)
        add(prefix_tokens=p, group_size=8, kv_dtype="fp8")
    add(prefix_tokens=REGIME_LONG_PREFIXES[0], group_size=8, q_per_kv=8, num_kv_heads=1)   # 70B at TP 8
    add(prefix_tokens=REGIME_LONG_PREFIXES[0], group_size=16, suffix_tokens=4096)
    for p, n in ((1024, 16), (4096, 16), (4096, 64), (16384, 16)):       # long private suffixes
        add(prefix_tokens=p, group_size=n, suffix_tokens=REGIME_LONG_SUFFIX)
    add(prefix_tokens=4096, group_size=16, suffix_tokens=REGIME_LONG_SUFFIX, kv_dtype="fp8")
    add(prefix_tokens=4096, group_size=16, n_groups=4, suffix_tokens=REGIME_LONG_SUFFIX, q_per_kv=6, num_kv_heads=2)
    return cfgs


# The trees grid: three-level prefix trees (a root prefix shared by every sequence, a group prefix, private
# suffixes) on the Llama-3-8B layer (G 4, 8 KV heads), a small-model layer (G 6, 2 KV heads, as Qwen2.5-1.5B) and
# fp8 KV. Corners and middle of root {1K, 4K} x prefix {1K, 4K} x (group_size, n_groups) x suffix {128, 1K},
# not the 64-point product.
TREE_SIZES = (1024, 4096)
TREE_BATCHES = ((4, 16), (16, 16), (64, 4))
TREE_SMALL_SHAPE = {"q_per_kv": 6, "num_kv_heads": 2, "head_dim": 128}


def trees_grid(page_size: int = 16) -> list[AttentionConfig]:
    cfgs, add = _collector(page_size)
    for r in TREE_SIZES:
        for p in TREE_SIZES:
            for n, ng in TREE_BATCHES:
                add(root_tokens=r, prefix_tokens=p, group_size=n, n_groups=ng)
            for n, ng in ((16, 4), (64, 4)):
                add(root_tokens=r, prefix_tokens=p, group_size=n, n_groups=ng, suffix_tokens=1024)
    for r in TREE_SIZES:
        add(root_tokens=r, prefix_tokens=r, group_size=16, n_groups=4)
    add(root_tokens=1024, prefix_tokens=4096, group_size=4, n_groups=16, suffix_tokens=1024)
    add(root_tokens=4096, prefix_tokens=1024, group_size=4, n_groups=16, suffix_tokens=1024)
    for r in TREE_SIZES:
        for n, ng in ((16, 16), (64, 4)):
            add(root_tokens=r, prefix_tokens=1024, group_size=n, n_groups=ng, **TREE_SMALL_SHAPE)
    add(root_tokens=4096, prefix_tokens=4096, group_size=16, n_groups=16, suffix_tokens=1024, **TREE_SMALL_SHAPE)
    add(root_tokens=1024, prefix_tokens=4096, group_size=4, n_groups=16, **TREE_SMALL_SHAPE)
    add(root_tokens=4096, prefix_tokens=1024, group_size=16, n_groups=16, kv_dtype="fp8")
    add(root_tokens=1024, prefix_tokens=4096, group_size=64, n_groups=4, kv_dtype="fp8")
    add(root_tokens=4096, prefix_tokens=1024, group_size=16, n_groups=16, kv_dtype="fp8", **TREE_SMALL_SHAPE)
    return cfgs


def build_grid(*, quick: bool = False, page_size: int = 16,
               coverage: bool = False) -> tuple[list[AttentionConfig], dict]:
    """(configurations, description). The full grid crosses prefix x group size for the Llama-3-8B
    layer shape (8 KV heads, G=4, suffix 128) and spans suffix, G, KV heads (1, as Llama-3-70B at TP8),
    fp8 KV and several groups around it; --quick keeps a handful of points across the breakeven."""
    ps = page_size
    cfgs, add = _collector(ps)

    if quick:
        for p, n in ((256, 4), (1024, 16), (4096, 64), (4096, 256), (16384, 1), (16384, 256)):
            add(prefix_tokens=p, group_size=n)
        add(prefix_tokens=4096, group_size=64, suffix_tokens=0)
        add(prefix_tokens=4096, group_size=64, q_per_kv=8, num_kv_heads=1)
        add(prefix_tokens=4096, group_size=64, kv_dtype="fp8")
        add(prefix_tokens=1024, group_size=32, n_groups=4)
        axes = {"prefix_tokens": [256, 1024, 4096, 16384], "group_size": [1, 4, 16, 64, 256],
                "suffix_tokens": [0, 128], "q_per_kv": [4, 8], "num_kv_heads": [1, 8], "kv_dtype": ["bf16", "fp8"]}
    else:
        for p in PREFIX_AXIS:  # core: Llama-3-8B layer, suffix 128
            for n in GROUP_AXIS:
                add(prefix_tokens=p, group_size=n)
        for p in (1024, 4096, 16384):  # suffix span
            for n in (16, 64, 256):
                for s in (0, 1024, 4096):
                    if p == 16384 and s == 4096 and n == 256:
                        continue
                    add(prefix_tokens=p, group_size=n, suffix_tokens=s)
        for g in (1, 8):  # G span
            for p in (1024, 4096, 16384):
                for n in (4, 64, 256):
                    add(prefix_tokens=p, group_size=n, q_per_kv=g)
        for p in (1024, 4096, 32768):  # Llama-3-70B at TP8: 1 KV head, G=8
            for n in (1, 16, 64, 256):
                add(prefix_tokens=p, group_size=n, q_per_kv=8, num_kv_heads=1)
        for p in (1024, 4096, 16384):  # fp8 KV
            for n in (4, 64, 256):
                add(prefix_tokens=p, group_size=n, kv_dtype="fp8")
        add(prefix_tokens=1024, group_size=32, n_groups=8)  # several groups
        add(prefix_tokens=4096, group_size=64, n_groups=4)
        add(prefix_tokens=16384, group_size=16, n_groups=4)
        add(prefix_tokens=4096, group_size=8, n_groups=16, suffix_tokens=1024)
        axes = {"prefix_tokens": list(PREFIX_AXIS), "group_size": list(GROUP_AXIS), "suffix_tokens": list(SUFFIX_AXIS),
                "q_per_kv": list(G_AXIS), "num_kv_heads": [1, 8], "kv_dtype": ["bf16", "fp8"],
                "n_groups": [1, 4, 8, 16]}
    if coverage:
        for c in coverage_grid(ps):
            if c not in cfgs:
                cfgs.append(c)
        axes = {k: sorted(set(v) | {getattr(c, k) for c in cfgs}) for k, v in axes.items()}
    desc = {"mode": ("quick" if quick else "full") + ("+coverage" if coverage else ""), "page_size": ps,
            "head_dim": 128, "axes": axes, "n_configs": len(cfgs)}
    return cfgs, desc


def named_grid(grid: str, *, quick: bool = False, page_size: int = 16) -> tuple[list[AttentionConfig], dict]:
    """(configurations, description) of a grid named as --grid names it."""
    cfgs, desc = build_grid(quick=quick, page_size=page_size, coverage=grid != "full")
    if grid == "coverage":
        cfgs = coverage_grid(page_size)
        desc = {**desc, "mode": "coverage", "n_configs": len(cfgs)}
    elif grid in ("regimes", "trees", "all"):
        if grid == "all":
            cfgs = cfgs + [c for c in regimes_grid(page_size) + trees_grid(page_size) if c not in cfgs]
        else:
            cfgs = regimes_grid(page_size) if grid == "regimes" else trees_grid(page_size)
        keys = (*desc["axes"], "head_dim") + (() if grid == "regimes" else ("root_tokens",))
        desc = {**desc, "mode": grid, "n_configs": len(cfgs),
                "axes": {k: sorted({getattr(c, k) for c in cfgs}) for k in keys}}
    return cfgs, desc


def owed_configs(cfgs: list[AttentionConfig], backends: list[str],
                 measurements: list[dict]) -> dict[str, list[AttentionConfig]]:
    """Per backend, the configurations it has no row of in `measurements` (a calibration file's): what a run cut
    short by its time budget, or a file whose kernels changed, still owes. A row's config without root_tokens is
    a two-level one (root_tokens 0), so tree and two-level configurations of one shape are owed separately."""
    done = {(m["backend"], AttentionConfig(**m["config"])) for m in measurements}
    return {b: [c for c in cfgs if (b, c) not in done] for b in backends}
