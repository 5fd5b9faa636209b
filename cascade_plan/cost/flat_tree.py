"""Flatten a prefix-sharing tree into arrays the cost model can broadcast over decode steps."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.inputs.workload import TreeNode


class FlatTree(msgspec.Struct, frozen=True):
    """Leaf classes i (one per leaf node of the tree) and shared nodes j (every node with tokens > 0).

    leaf_seqs[i]      sequences of class i in the whole batch
    leaf_output[i]    output tokens each of them decodes
    leaf_private[i]   prompt tokens of their own (not shared)
    leaf_shared[i]    tokens of all shared nodes above them (their own leaf node's tokens included)
    leaf_instances[i] instances of leaf node i (sibling groups of `samples` sequences each)
    node_tokens[j]    tokens of one instance of node j
    node_instances[j] distinct instances of node j in the batch (product of copies down its path)
    node_level[j]     cascade level of node j (0 = outermost level that carries tokens)
    pair_node[p], pair_leaf[p], pair_seqs[p]
                      sparse (node j, leaf class i) incidence: pair_seqs sequences of class i under ONE
                      instance of node j (a tree has depth x leaves pairs, never a dense node x leaf matrix)

    Counts are float64: products of bounded counts stay exact well past 2**53 of any real batch, and
    never wrap around as int64 products would.
    """

    leaf_seqs: np.ndarray
    leaf_output: np.ndarray
    leaf_private: np.ndarray
    leaf_shared: np.ndarray
    leaf_instances: np.ndarray
    node_tokens: np.ndarray
    node_instances: np.ndarray
    node_level: np.ndarray
    pair_node: np.ndarray
    pair_leaf: np.ndarray
    pair_seqs: np.ndarray

    @property
    def total_seqs(self) -> int:
        return int(self.leaf_seqs.sum())

    @property
    def max_output(self) -> int:
        return int(self.leaf_output.max())

    @property
    def n_levels(self) -> int:
        return int(self.node_level.max()) + 1 if self.node_level.size else 0

    @property
    def unique_prefix_tokens(self) -> float:
        """Shared-node tokens stored once each: what storage sharing keeps."""
        return float((self.node_tokens * self.node_instances).sum())


def flatten(tree: TreeNode) -> FlatTree:
    leaves: list[tuple[int, int, int, int, int]] = []          # seqs, output, private, shared, instances
    nodes: list[tuple[int, int, int, list[int]]] = []           # tokens, instances, depth, leaf ids below

    def walk(node: TreeNode, instances: int, shared: int, depth: int) -> list[int]:
        instances *= node.copies
        shared += node.tokens
        if node.children:
            below = [leaf for child in node.children for leaf in walk(child, instances, shared, depth + 1)]
        else:
            assert node.samples is not None and node.output_tokens is not None   # a leaf: TreeNode.__post_init__
            leaves.append((instances * node.samples, node.output_tokens, node.private_tokens, shared, instances))
            below = [len(leaves) - 1]
        if node.tokens > 0:
            nodes.append((node.tokens, instances, depth, below))
        return below

    walk(tree, 1, 0, 0)          # depth is bounded by the workload schema (limits.MAX_DEPTH)
    n_leaf = len(leaves)
    leaf = np.array(leaves, dtype=float).reshape(n_leaf, 5)
    depths = sorted({d for _, _, d, _ in nodes})
    pairs = [(j, i, leaves[i][0] // inst) for j, (_, inst, _, below) in enumerate(nodes) for i in below]
    pair = np.array(pairs, dtype=float).reshape(len(pairs), 3)
    return FlatTree(
        leaf_seqs=leaf[:, 0], leaf_output=leaf[:, 1], leaf_private=leaf[:, 2], leaf_shared=leaf[:, 3],
        leaf_instances=leaf[:, 4],
        node_tokens=np.array([n[0] for n in nodes], dtype=float),
        node_instances=np.array([n[1] for n in nodes], dtype=float),
        node_level=np.array([depths.index(n[2]) for n in nodes], dtype=np.int64),
        pair_node=pair[:, 0].astype(np.int64), pair_leaf=pair[:, 1].astype(np.int64), pair_seqs=pair[:, 2],
    )
