"""Upper bounds on every count a user can write, and plausible ranges for every physical quantity.

The bounds are far above anything a GPU can hold (a 10-million-token node is ~1.3 TB of Llama-3-8B KV;
a million samples of one prompt is several orders beyond any engine's batch), and low enough that
no product of them overflows a float64 or an int64, or makes a run's arrays grow past a bounded size.
Every number here is checked where it enters (workload schema, HF config, hardware profile,
calibration file, command-line axes), so the cost model downstream can trust what it is given.
"""

from __future__ import annotations

# Input files: a workload or hardware profile is a few kilobytes; a 2,048-node tree written out in
# full is ~130 KB. Larger files are refused before parsing (parsing is the slow part).
MAX_YAML_BYTES = 1 << 20
MAX_CONFIG_JSON_BYTES = 1 << 20        # a Hugging Face config.json: a few KB (the largest known ~10 KB)
MAX_HARDWARE_BYTES = 64 << 10          # a hardware profile: ~2 KB
# A calibration file: the largest shipped one (the H200 probe, 5.1 MB with its regimes, fp8, query-group and
# held-out step rows) x 4 is 20.3 MB; 32 MiB leaves room for a probe with more backends and `probe --workload` rows
# merged in, and still reads in about a second.
MAX_CALIBRATION_BYTES = 32 << 20

# Workload tree (per node / per leaf).
MAX_TOKENS = 10_000_000            # tokens of one node, or private prompt tokens of one sequence
MAX_OUTPUT_TOKENS = 10_000_000     # tokens one sequence decodes
MAX_COPIES = 1_000_000             # distinct instances of one node under its parent
MAX_SAMPLES = 1_000_000            # sequences decoding under one leaf instance
# Whole tree.
MAX_DEPTH = 64                     # levels of nesting (a cascade of more levels is not a real workload)
MAX_NODES = 2_048                  # nodes in the tree, leaves included
MAX_SEQUENCES = 1_000_000_000      # sequences in the whole batch (product of copies and samples)
MAX_CONTEXT_TOKENS = 100_000_000   # one sequence's shared + private + output tokens
MAX_BLOCK_SIZE = 1_048_576         # KV page size in tokens

# `check` thresholds (speedup, seconds): finite.
MAX_THRESHOLD = 1e12

# Command-line sweep axes.
MAX_AXIS_VALUES = 4_096            # values on one axis
MAX_GRID_POINTS = 1_000_000        # prefix x batch x suffix points of one breakeven sweep

# Model shapes (Hugging Face config.json).
MAX_LAYERS = 4_096
MAX_HIDDEN = 1_048_576
MAX_HEADS = 65_536
MAX_HEAD_DIM = 65_536
MAX_VOCAB = 100_000_000
MAX_INTERMEDIATE = 10_000_000
MAX_EXPERTS = 1_000_000

# Hardware profiles: (low, high), SI units. A profile outside these is a typo or a unit slip
# (GB/s written as bytes/s, a TFLOP figure without its exponent), not a GPU.
HBM_BYTES_PER_S = (1e9, 1e15)          # 1 GB/s .. 1 PB/s
MEMORY_BYTES = (1e8, 1e14)             # 100 MB .. 100 TB
FLOP_PER_S = (1e11, 1e19)              # 0.1 TFLOP/s .. 10 EFLOP/s
L2_BYTES = (0.0, 1e11)                 # 0 .. 100 GB
SM_COUNT = (1, 100_000)


# Serving and log commands (route, rl, simulate-log, analyze): bounds that keep one run within
# seconds and a few hundred MB (benchmarks/bounded_commands.py runs the worst cases, ~5 s of CPU at most:
# `route` 10^6 requests over 4,096 replicas, `rl` ~80 priced batches/s, `simulate-log` ~1.5M rows/s).
MAX_REPLICAS = 4_096               # engine replicas of one fleet
# requests one `route` run simulates: the size benchmarks/route_1m.py times (co-residency converges long before)
MAX_ROUTE_REQUESTS = 1_000_000
MAX_SPREAD = 1_000.0               # coefficients of variation, sibling spread (in decodes): lognormal sigma ~3.7
MAX_RL_SEQUENCES = 1 << 16         # completions drawn over all sampled RL steps (sampled steps x prompts x samples)
MAX_RL_ROLLOUTS = 256              # batches priced: sampled steps x replicas holding a prompt x waves of what fits
MAX_SAMPLED_STEPS = 256            # RL steps drawn to average over
MAX_SECONDS = 1e12                 # any duration given in seconds (~32,000 years)
MAX_LOG_SEQUENCES = 100_000        # sequences in one simulated log
MAX_LOG_ROWS = 5_000_000           # (step, sequence) rows of one simulated log (~300 MB of JSON Lines)
MAX_THREADS = 1_024                # DuckDB threads
MAX_SHOW_BAD = 10_000              # malformed log records listed by file and line (all are counted)
MAX_SEED = 2**63 - 1
