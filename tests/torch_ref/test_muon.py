"""torch_ref.muon: Newton-Schulz math, the Muon update formula, and 2-process == 1-process."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_ref.muon import NS_COEFFICIENTS, NS_NORM_EPS, Muon, update_scale, zeropower_via_newtonschulz5


def _ns_through_svd(G: np.ndarray, steps: int) -> np.ndarray:
    """Reference NS in float64: the quintic acts on singular values only, U p(s) V^T."""
    a, b, c = NS_COEFFICIENTS
    U, s, Vt = np.linalg.svd(G.astype(np.float64), full_matrices=False)
    s = s / (np.sqrt((s**2).sum()) + NS_NORM_EPS)
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return (U * s) @ Vt


@pytest.mark.parametrize("shape", [(48, 48), (96, 32), (32, 96)])
def test_fp32_newton_schulz_matches_singular_value_polynomial(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    got = zeropower_via_newtonschulz5(G, 5, dtype=torch.float32)
    want = _ns_through_svd(G.numpy(), 5)
    assert got.dtype == torch.float32 and got.shape == G.shape
    # fp32 matmul chains of 5 quintic steps: ~1e-5 relative error per entry of O(0.1) values.
    np.testing.assert_allclose(got.numpy(), want, atol=2e-5, rtol=1e-4)


def test_bf16_newton_schulz_is_bf16_and_close_to_fp32():
    G = torch.randn(3, 64, 32, generator=torch.Generator().manual_seed(2))
    got = zeropower_via_newtonschulz5(G, 5)
    assert got.dtype == torch.bfloat16 and got.shape == G.shape
    ref = zeropower_via_newtonschulz5(G, 5, dtype=torch.float32)
    rel = (got.float() - ref).norm(dim=(-2, -1)) / ref.norm(dim=(-2, -1))
    # bf16 (8-bit mantissa) rounding compounds over 5 quintic steps: measured 3-4% per slice.
    assert rel.max() < 0.06, rel


def test_tall_matrix_is_iterated_transposed():
    G = torch.randn(80, 24, generator=torch.Generator().manual_seed(3))
    tall = zeropower_via_newtonschulz5(G, 5)
    wide = zeropower_via_newtonschulz5(G.mT.contiguous(), 5)
    # Same bf16 ops on the same (transposed) data: bitwise equal.
    assert torch.equal(tall, wide.mT)


def test_batched_slices_are_orthogonalised_independently():
    # Very different scales per slice: a shared norm would shrink the small slice to nothing.
    G = torch.randn(3, 32, 32, generator=torch.Generator().manual_seed(4)) * torch.tensor([1e-3, 1.0, 1e3])[:, None, None]
    batched = zeropower_via_newtonschulz5(G, 5, dtype=torch.float32)
    for i in range(3):
        single = zeropower_via_newtonschulz5(G[i], 5, dtype=torch.float32)
        # Batched vs single fp32 GEMMs may block the sums differently: ~1e-6 relative.
        np.testing.assert_allclose(batched[i].numpy(), single.numpy(), atol=1e-5)


def test_singular_values_land_near_one():
    G = torch.randn(32, 128, generator=torch.Generator().manual_seed(5))
    s = torch.linalg.svdvals(zeropower_via_newtonschulz5(G, 5).float())
    # These coefficients do not converge to 1; they end in a band around it (RECORD.md 5).
    assert 0.5 < s.min() and s.max() < 1.5


def test_newton_schulz_rejects_vectors_and_bad_dtype():
    with pytest.raises(ValueError, match="at least a matrix"):
        zeropower_via_newtonschulz5(torch.ones(4), 5)
    with pytest.raises(ValueError, match="dtype"):
        zeropower_via_newtonschulz5(torch.ones(4, 4), 5, dtype=torch.float16)


def test_update_scale_uses_last_two_dims():
    assert update_scale((3072, 768)) == 2.0
    assert update_scale((768, 3072)) == 1.0
    assert update_scale((3, 768, 768)) == 1.0


def test_muon_two_steps_follow_the_formula():
    torch.manual_seed(6)
    p0 = torch.randn(16, 4)  # tall: scale sqrt(16/4) = 2
    p = torch.nn.Parameter(p0.clone())
    opt = Muon([p], lr=0.05, momentum=0.9, ns_dtype=torch.float32)
    grads = [torch.randn(16, 4) for _ in range(2)]
    buf = torch.zeros(16, 4, dtype=torch.float64)
    want = p0.double()
    for g in grads:
        p.grad = g.clone()
        opt.step()
        buf = 0.9 * buf + 0.1 * g.double()
        nesterov = 0.1 * g.double() + 0.9 * buf
        want = want - 0.05 * 2.0 * torch.from_numpy(_ns_through_svd(nesterov.numpy(), 5))
    # fp32 NS vs float64 SVD reference, scaled by lr*2 = 0.1: ~1e-6 absolute.
    np.testing.assert_allclose(p.detach().numpy(), want.numpy(), atol=1e-5)


def test_muon_without_nesterov_uses_the_buffer():
    p = torch.nn.Parameter(torch.zeros(8, 8))
    opt = Muon([p], lr=1.0, momentum=0.5, nesterov=False, ns_dtype=torch.float32)
    g = torch.randn(8, 8, generator=torch.Generator().manual_seed(7))
    p.grad = g
    opt.step()
    # First step: buffer = 0.5 * g, and NS is invariant to positive scaling of its input.
    want = -zeropower_via_newtonschulz5(0.5 * g, 5, dtype=torch.float32)
    # Same fp32 ops on the same input.
    torch.testing.assert_close(p.detach(), want)


def test_muon_groups_by_size_and_rejects_bad_input():
    mats = [torch.nn.Parameter(torch.zeros(s)) for s in [(4, 8), (8, 4), (2, 4, 4), (3, 3)]]
    opt = Muon(mats)
    sizes = sorted(len(g["params"]) for g in opt.param_groups)
    assert sizes == [1, 3]  # 32-element group: (4, 8), (8, 4), (2, 4, 4); then (3, 3)
    with pytest.raises(ValueError, match="matrices"):
        Muon([torch.nn.Parameter(torch.zeros(4))])
    with pytest.raises(RuntimeError, match="torch.distributed"):
        Muon(mats, rank=0, world_size=2)
    with pytest.raises(RuntimeError, match="no gradient"):
        opt.step()


# ---------------------------------------------------------------- 2 gloo processes vs 1 process

_SHAPES = [(3, 16, 16), (3, 16, 16), (3, 16, 16), (16, 16), (64, 16), (16, 64), (64, 16)]
_STEPS = 3


def _fresh_params() -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(8)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in _SHAPES]


def _run_muon(rank: int, world_size: int) -> tuple[list[torch.Tensor], int]:
    params = _fresh_params()
    opt = Muon(params, lr=0.05, momentum=0.95, rank=rank, world_size=world_size)
    gen = torch.Generator().manual_seed(9)  # same gradients on every rank, as after all-reduce
    for step in range(_STEPS):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        for group in opt.param_groups:
            group["momentum"] = 0.85 + 0.1 * step / _STEPS
            group["lr"] = 0.05 * (1 - 0.2 * step)
        opt.step()
    owned = sum(1 for p in params if "momentum_buffer" in opt.state[p])
    return [p.detach().clone() for p in params], owned


def _gloo_worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)  # two processes share the CPU
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        params, owned = _run_muon(rank, world_size)
        torch.save({"params": params, "owned": owned}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _join_or_kill(context: mp.ProcessContext, timeout_s: float) -> None:
    """Join spawned workers, failing (not hanging) if a collective never completes."""
    deadline = time.monotonic() + timeout_s
    while not context.join(timeout=2):
        if time.monotonic() > deadline:
            for proc in context.processes:
                proc.kill()
            pytest.fail(f"gloo workers did not finish within {timeout_s} s")


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process(tmp_path):
    single, owned_single = _run_muon(0, 1)
    context = mp.spawn(_gloo_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=False)
    _join_or_kill(context, timeout_s=240)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert owned_single == len(_SHAPES)
    # Round-robin ownership: every parameter has its momentum on exactly one rank.
    assert sorted(r["owned"] for r in results) == [2, 5]  # groups of 3, 1, 3 params: rank 0 owns slots 0 and 2 of each
    for r in results:
        for got, want in zip(r["params"], single):
            # Each update is computed by the same ops on the same data on one rank, and the
            # gather only copies its bf16 bits, so the result is bitwise equal.
            assert torch.equal(got, want)
