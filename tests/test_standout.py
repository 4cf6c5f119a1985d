"""The standout z of a pair against a slow, obvious reference, and its place in mining."""

import numpy as np
import pytest

from bitextmine.config import MineConfig
from bitextmine.mining import mine_embeddings
from bitextmine.mining.standout import BLOCK, moments, moments_of, pair_standout, standout


def _unit(rng, n, d):
    a = rng.standard_normal((n, d)).astype(np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _reference_z(x, y, i, j):
    """Mean over both sentences of (cos - mean) / sd of the sentence's cosines with the other side's rows,
    the partner left out (population sd)."""
    c = float(np.float64(x[i]) @ np.float64(y[j]))
    cx = np.delete(np.float64(y) @ np.float64(x[i]), j)
    cy = np.delete(np.float64(x) @ np.float64(y[j]), i)
    return ((c - cx.mean()) / cx.std() + (c - cy.mean()) / cy.std()) / 2


def test_standout_equals_reference():
    rng = np.random.default_rng(0)
    x, y = _unit(rng, 40, 16), _unit(rng, 29, 16)
    src, tgt = rng.integers(0, 40, 50), rng.integers(0, 29, 50)
    cos = np.einsum("pd,pd->p", x[src], y[tgt])
    got = pair_standout(cos, src, tgt, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    want = [_reference_z(x, y, i, j) for i, j in zip(src, tgt)]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_standout_on_embeddings_with_a_common_direction():
    """Sentence embeddings share a direction (mean cosines of 0.2 to 0.4): the variance is a small difference of
    large sums, and the quadratic form runs in float32; z stays within 1e-4 of the float64 reference."""
    rng = np.random.default_rng(5)
    common = _unit(rng, 1, 512)
    x, y = (_unit(rng, n, 512) + 0.6 * common for n in (3000, 2500))
    x, y = (a / np.linalg.norm(a, axis=1, keepdims=True) for a in (x, y))
    src, tgt = rng.integers(0, 3000, 40), rng.integers(0, 2500, 40)
    cos = np.einsum("pd,pd->p", x[src], y[tgt])
    assert 0.2 < float((x[:100] @ y[:100].T).mean()) < 0.4
    got = pair_standout(cos, src, tgt, lambda i: x[i], lambda i: y[i], moments_of(x), moments_of(y))
    want = [_reference_z(x, y, i, j) for i, j in zip(src, tgt)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_moments_do_not_depend_on_how_rows_arrive():
    rng = np.random.default_rng(1)
    a = _unit(rng, 2 * BLOCK + 5, 8)
    m = moments_of(a)
    same = moments(a[s:s + BLOCK] for s in range(0, len(a), BLOCK))
    assert m.n == len(a) and np.array_equal(m.first, same.first) and np.array_equal(m.second, same.second)
    np.testing.assert_allclose(m.second, np.float64(a).T @ np.float64(a), rtol=1e-10, atol=1e-9)
    assert moments(iter(())).n == 0


def test_tiny_sides_have_no_spread():
    rng = np.random.default_rng(2)
    x, y = _unit(rng, 2, 8), _unit(rng, 5, 8)
    z = standout(np.array([0.5, 0.1]), x, y[:2], moments_of(x), moments_of(y))
    assert np.isinf(z).all()  # x's side has 2 rows: y's statistics cannot be formed


def test_min_z_drops_pairs_that_do_not_stand_out():
    """Small input: half the sources have a (noisy) translation, the rest only unrelated targets. Margins
    let unrelated pairs through; the z floor keeps the translations and drops them."""
    rng = np.random.default_rng(3)
    d, n = 64, 30
    x = _unit(rng, n, d)
    noisy = x[:15] + 0.1 * rng.standard_normal((15, d)).astype(np.float32)
    y = np.concatenate([noisy / np.linalg.norm(noisy, axis=1, keepdims=True), _unit(rng, 15, d)])
    gold = {(i, i) for i in range(15)}
    plain = mine_embeddings(x, y, config=MineConfig(threshold=1.0, min_z=0))
    assert gold <= set(zip(plain.src.tolist(), plain.tgt.tolist())) and len(plain) > 15
    got = mine_embeddings(x, y, config=MineConfig(threshold=1.0, min_z=4.5))
    assert set(zip(got.src.tolist(), got.tgt.tolist())) == gold
    kept = np.isin(plain.src, got.src)
    assert np.array_equal(plain.score[kept], got.score)  # the floor filters; it does not rescore


@pytest.mark.parametrize("min_z", [0.0, 4.0])
def test_min_z_off_or_on_keeps_order_and_scores(min_z):
    rng = np.random.default_rng(4)
    x, y = _unit(rng, 50, 32), _unit(rng, 45, 32)
    got = mine_embeddings(x, y, config=MineConfig(threshold=0, min_z=min_z))
    assert np.all(np.diff(got.score) <= 0)
