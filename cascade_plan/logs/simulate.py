"""The batch log a workload would produce: every decode step of its run, per-sequence form.

Step k (1-based) holds every sequence still decoding (output_tokens >= k); each reads its shared
nodes and `private_tokens + k` tokens of its own, exactly the load `estimate` integrates, so
`analyze` on the simulated log reproduces `estimate`'s run."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import msgspec

from cascade_plan.atomic import open_atomic
from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.workload import TreeNode


@dataclass(frozen=True)
class SimSeq:
    request: str
    group: str             # chain of shared-node ids, outermost first ('' when nothing is shared)
    levels: tuple[int, ...]  # cumulative token end of each chain level
    private_tokens: int
    output_tokens: int

    @property
    def shared(self) -> int:
        return self.levels[-1] if self.levels else 0


def log_size(tree: TreeNode) -> tuple[int, int]:
    """(sequences, (step, sequence) rows) of the tree's simulated log, in closed form (no sequence
    is materialised): every sequence writes one row per token it decodes."""
    def walk(node: TreeNode) -> tuple[int, int]:
        if node.children:
            seqs = rows = 0
            for child in node.children:
                s, r = walk(child)
                seqs, rows = seqs + s, rows + r
        else:
            assert node.samples is not None and node.output_tokens is not None   # a leaf: TreeNode.__post_init__
            seqs, rows = node.samples, node.samples * node.output_tokens
        return node.copies * seqs, node.copies * rows

    return walk(tree)


def check_log_size(tree: TreeNode, file: str | None = None) -> None:
    """Refuse, before anything is written, a log too large to simulate in bounded time and memory."""
    seqs, rows = log_size(tree)
    if seqs > limits.MAX_LOG_SEQUENCES:
        raise InputError(f"the simulated log would hold {seqs:,} sequences; simulate-log writes logs of up to "
                         f"{limits.MAX_LOG_SEQUENCES:,} (use fewer copies or samples; `estimate` prices any size)",
                         file=file, field="tree")
    if rows > limits.MAX_LOG_ROWS:
        raise InputError(f"the simulated log would hold {rows:,} sequence-steps (~{rows * 60 / 1e9:,.0f} GB); "
                         f"simulate-log writes logs of up to {limits.MAX_LOG_ROWS:,} (fewer output tokens or "
                         "sequences; `estimate` prices any size)", file=file,
                         field="tree")


def tree_sequences(tree: TreeNode) -> list[SimSeq]:
    """Every sequence of the tree with its chain of shared nodes (one id per node with tokens)."""
    out: list[SimSeq] = []

    def walk(node: TreeNode, path: tuple[int, ...], chain: tuple[str, ...], ends: tuple[int, ...]) -> None:
        for c in range(node.copies):
            here = path + (c,)
            ids, cum = chain, ends
            if node.tokens > 0:
                ids = chain + ("n" + ".".join(map(str, here)),)
                cum = ends + ((ends[-1] if ends else 0) + node.tokens,)
            if node.children:
                for i, child in enumerate(node.children):
                    walk(child, here + (i,), ids, cum)
            else:
                assert node.samples is not None and node.output_tokens is not None   # a leaf
                for s in range(node.samples):
                    out.append(SimSeq(request=f"{'.'.join(map(str, here))}-s{s}", group="/".join(ids),
                                      levels=cum, private_tokens=node.private_tokens,
                                      output_tokens=node.output_tokens))

    walk(tree, (), (), ())
    return out


def _active_runs(seqs: list[SimSeq]) -> Iterator[tuple[int, int, list[int]]]:
    """(first step, last step, indices of the sequences decoding in those steps, in tree order) for
    each run of steps with the same sequences: the list is rebuilt only where some finish, from the
    previous one, so the work is linear in the rows written."""
    ends = sorted({s.output_tokens for s in seqs})
    active = list(range(len(seqs)))
    first = 1
    for last in ends:
        yield first, last, active
        active = [i for i in active if seqs[i].output_tokens > last]
        first = last + 1


def log_records(tree: TreeNode, replica: str = "r0", step_s: float = 0.01) -> Iterator[dict]:
    """One per-sequence record per decode step (ts advances by `step_s`)."""
    seqs = tree_sequences(tree)
    for first, last, active in _active_runs(seqs):
        for k in range(first, last + 1):
            rows = []
            for i in active:
                s = seqs[i]
                row = {"request": s.request, "group": s.group, "shared": s.shared, "private": s.private_tokens + k}
                if len(s.levels) > 1:
                    row["levels"] = list(s.levels)
                rows.append(row)
            yield {"ts": round(k * step_s, 6), "replica": replica, "step": k, "seqs": rows}


def encoded_records(tree: TreeNode, replica: str = "r0", step_s: float = 0.01) -> Iterator[bytes]:
    """`log_records`, each already encoded as one JSON line, byte for byte what msgspec writes for
    it: every sequence's fields but its private length are encoded once, so a step costs one join."""
    enc = msgspec.json.Encoder()
    seqs = tree_sequences(tree)
    heads, tails, base = [], [], []
    for s in seqs:
        row = {"request": s.request, "group": s.group, "shared": s.shared, "private": 0}
        head = enc.encode(row)
        heads.append(head[:-2])                                     # up to '"private":'
        tails.append(b"," + enc.encode({"levels": list(s.levels)})[1:] if len(s.levels) > 1 else b"}")
        base.append(s.private_tokens)
    for first, last, active in _active_runs(seqs):
        parts = [(heads[i], base[i], tails[i]) for i in active]
        for k in range(first, last + 1):
            head = enc.encode({"ts": round(k * step_s, 6), "replica": replica, "step": k, "seqs": []})
            body = b",".join(b"%s%d%s" % (h, p + k, t) for h, p, t in parts)
            yield head[:-2] + body + b"]}\n"


def open_for_write(path: Path, fh: BinaryIO) -> BinaryIO | gzip.GzipFile:
    """Compress by suffix: .gz -> gzip, anything else plain (zstd: compress afterwards, `zstd LOG`).
    Level 1: on these repetitive lines it compresses ~30x, 25 times faster than gzip's level 9
    (which made the largest log take 12 s of CPU instead of 3)."""
    return gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, compresslevel=1) if str(path).endswith(".gz") else fh


def write_log(tree: TreeNode, path: Path, replica: str = "r0", step_s: float = 0.01) -> int:
    """Write the simulated log as JSON Lines (atomically). Returns the number of records."""
    check_log_size(tree)
    n = 0
    with open_atomic(path) as raw:
        out = open_for_write(path, raw)
        for line in encoded_records(tree, replica, step_s):
            out.write(line)
            n += 1
        if out is not raw:
            out.close()
    return n
