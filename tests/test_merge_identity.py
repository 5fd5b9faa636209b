"""The seed's decomposition: attention split at the prefix boundary and merged by log-sum-exp equals
single-pass attention (numpy, float64)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


def attn(q, k, v, scale):
    s = q @ k.T * scale
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(-1, keepdims=True)
    return (e @ v) / total, (m + np.log(total))[..., 0]


def merge(o1, l1, o2, l2):
    m = np.maximum(l1, l2)
    w1, w2 = np.exp(l1 - m), np.exp(l2 - m)
    return (w1[:, None] * o1 + w2[:, None] * o2) / (w1 + w2)[:, None]


def cascade_vs_reference(d, p, b, s, seed):
    rng = np.random.default_rng(seed)
    kp, vp = rng.standard_normal((p, d)), rng.standard_normal((p, d))
    ks, vs = rng.standard_normal((b, s, d)), rng.standard_normal((b, s, d))
    q = rng.standard_normal((b, d))
    scale = 1 / np.sqrt(d)
    o1, l1 = attn(q, kp, vp, scale)                       # one matrix-matrix pass for the whole batch
    o2, l2 = np.zeros((b, d)), np.zeros(b)
    for i in range(b):
        o, lse = attn(q[i:i + 1], ks[i], vs[i], scale)
        o2[i], l2[i] = o[0], lse[0]
    ref = np.stack([attn(q[i:i + 1], np.vstack([kp, ks[i]]), np.vstack([vp, vs[i]]), scale)[0][0] for i in range(b)])
    return np.abs(merge(o1, l1, o2, l2) - ref).max()


def test_seed_example():
    assert cascade_vs_reference(64, 512, 8, 40, 0) < 1e-12


@settings(max_examples=40, deadline=None)
@given(d=st.sampled_from([8, 64, 128]), p=st.integers(1, 300), b=st.integers(1, 9), s=st.integers(1, 50),
       seed=st.integers(0, 2**31))
def test_merge_is_exact_for_any_split(d, p, b, s, seed):
    assert cascade_vs_reference(d, p, b, s, seed) < 1e-10


def test_merge_of_three_levels_equals_single_pass():
    rng = np.random.default_rng(1)
    d, b = 32, 5
    parts = [(rng.standard_normal((n, d)), rng.standard_normal((n, d))) for n in (100, 37, 9)]
    q = rng.standard_normal((b, d))
    scale = 1 / np.sqrt(d)
    o, lse = attn(q, *parts[0], scale)
    for k, v in parts[1:]:
        o2, l2 = attn(q, k, v, scale)
        o, lse = merge(o, lse, o2, l2), np.logaddexp(lse, l2)
    ref, _ = attn(q, np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts]), scale)
    assert np.abs(o - ref).max() < 1e-12
