"""jaxgpt_tools.bench.newton_schulz (scripts/bench_ns.py and bench.py's newton_schulz suite): the shapes it times
and the FLOPs it reports."""

from __future__ import annotations

from jaxgpt_tools.bench import newton_schulz as bench_ns


def test_scaled_record_shapes_divide_only_the_matrix_dims():
    assert bench_ns.scaled_record_shapes(4) == (((3, 192, 192), 11), ((192, 192), 11), ((768, 192), 12), ((192, 768), 12))
    assert bench_ns.scaled_record_shapes(1) == bench_ns.RECORD_SHAPES


def test_flops_count_each_matrix_on_its_wide_side():
    result = bench_ns.bench_newton_schulz((((2, 8, 16), 1), ((16, 8), 1)), devices=1, repeats=1)
    # One NS step of a (r, c) matrix, r <= c: A = X X^T (r r c), B = A A (r^3), B X (r r c), 2 FLOPs
    # per multiply-add; 5 steps; the (2, 8, 16) stack is two such matrices, (16, 8) runs as (8, 16).
    per_matrix = 2 * (8 * 8 * 16 + 8**3 + 8 * 8 * 16) * 5
    assert result["flops_single"] == 3 * per_matrix
    assert result["matrices"] == 2 and result["devices"] == 1 and "split_s" not in result
    assert result["single_s"] > 0 and result["single_first_s"] > 0
