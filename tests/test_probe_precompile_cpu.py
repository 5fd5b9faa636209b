"""Compiling ahead of timing (kernels_probe/attention/precompile.py), on the CPU: the plans built over shape-only
inputs launch exactly what the timed plans launch, every launch of a plan's warmup compiles instead of running, and
under Triton's interpreter nothing is compiled ahead."""

from __future__ import annotations

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.own_kernel_tune import DEFAULT_TUNE  # noqa: E402
from kernels_probe.attention import triton_plans  # noqa: E402
from kernels_probe.attention.data import build_data, shape_data  # noqa: E402
from kernels_probe.attention.grid import AttentionConfig  # noqa: E402
from kernels_probe.attention.precompile import precompile  # noqa: E402
from kernels_probe.attention.triton_backend import plans  # noqa: E402

SMALL = dict(head_dim=16, num_kv_heads=2, page_size=16)
CASES = [AttentionConfig(prefix_tokens=1024, group_size=4, suffix_tokens=128, **SMALL),
         AttentionConfig(prefix_tokens=2048, group_size=2, suffix_tokens=2048, q_per_kv=8, **SMALL),
         AttentionConfig(prefix_tokens=256, group_size=8, n_groups=2, suffix_tokens=0, q_per_kv=1, **SMALL),
         AttentionConfig(prefix_tokens=512, group_size=4, n_groups=2, suffix_tokens=64, root_tokens=256, **SMALL),
         AttentionConfig(prefix_tokens=4096, group_size=1, suffix_tokens=16, kv_dtype="fp8", **SMALL)]


def _key(kernel, args) -> tuple:
    """What Triton compiles a launch for, of its positional arguments: each tensor's dtype (torch allocations share
    their alignment), each integer's specialisation (== 1, divisible by 16) unless the kernel does not specialise on
    it, and other values as they are."""
    skip = set(kernel.kwargs.get("do_not_specialize") or ())
    out = []
    for name, a in zip(kernel.arg_names, args):
        if torch.is_tensor(a):
            out.append(a.dtype)
        elif isinstance(a, int) and not isinstance(a, bool):
            out.append(None if name in skip else (a == 1, a % 16 == 0))
        else:
            out.append(a)
    return tuple(out)


def _launches(monkeypatch, kernel_plans) -> list:
    """(kernel, grid, warmup?, _key of its arguments, its constexprs and options) of every launch of the plans'
    warmups, in order."""
    seen: list = []

    def record(kernel, grid, warmup, *args, **kwargs):
        seen.append((kernel.fn.__name__, grid, warmup, _key(kernel, args),
                     tuple(sorted((k, str(v)) for k, v in kwargs.items()))))
    with monkeypatch.context() as m:
        m.setattr(triton_plans, "_launch", record)
        for p in kernel_plans:
            if p is not None:
                p.warmup()
    return seen


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: c.label())
def test_shape_only_inputs_give_the_launches_of_the_real_ones(monkeypatch, cfg):
    """A launch compiles for its tensors' dtypes, its integers' specialisations and its constexprs; block tables
    enter as pointers and a stride the kernels do not specialise on, so a one-column table over a two-page cache
    serves. Every launch's grid and compile key agree with the real inputs'."""
    real = _launches(monkeypatch, plans(build_data(cfg, "cpu"), sm_count=132, tune=DEFAULT_TUNE))
    shaped = _launches(monkeypatch, plans(shape_data(cfg, "cpu"), sm_count=132, tune=DEFAULT_TUNE))
    assert real and all(w for _, _, w, _, _ in real)          # warmup compiles every launch, runs none
    assert shaped == real


def test_a_plan_warms_up_every_kernel_it_launches(monkeypatch):
    cfg = CASES[1]
    d = build_data(cfg, "cpu")
    dec_s, dec_d, casc = plans(d, sm_count=132, tune=DEFAULT_TUNE)
    launched: list = []
    monkeypatch.setattr(triton_plans, "_launch", lambda kernel, grid, warmup, *a, **kw: launched.append(
        (kernel.fn.__name__, warmup)))
    for p in (dec_s, dec_d, casc):
        p()
    ran = [k for k, w in launched if not w]
    launched.clear()
    for p in (dec_s, dec_d, casc):
        p.warmup()
    assert [k for k, w in launched if w] == ran and "prefix_kernel" in ran and "paged_decode_kernel" in ran


def test_launch_compiles_instead_of_running_when_warming_up():
    calls: list = []

    class Kernel:
        def warmup(self, *args, grid, **kwargs):
            calls.append(("warmup", grid, args, kwargs))

        def __getitem__(self, grid):
            return lambda *args, **kwargs: calls.append(("run", grid, args, kwargs))

    triton_plans._launch(Kernel(), (2, 3), True, 1, 2, A=4, num_warps=2)
    triton_plans._launch(Kernel(), (2, 3), False, 1, 2, A=4, num_warps=2)
    assert calls == [("warmup", (2, 3), (1, 2), {"A": 4, "num_warps": 2}),
                     ("run", (2, 3), (1, 2), {"A": 4, "num_warps": 2})]


def test_the_interpreter_compiles_nothing_ahead():
    assert precompile(CASES[:1], "cpu", sm_count=2) == {"skipped": "Triton's interpreter compiles nothing"}
