"""tools/probe_interaction.py: the near misses it makes, the scorer's padding and batching, the mined
non-translations and the area under the curve, against slow references on tiny seeded data."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import probe_interaction as probe  # noqa: E402


def test_perturb_changes_one_meaningful_place():
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        out = probe.perturb("He did not pay 20 dollars for the ticket.", rng)
        assert out is not None and out != "He did not pay 20 dollars for the ticket."
        seen.add(out)
    assert "She did not pay 20 dollars for the ticket." in seen  # a pronoun
    assert "He did pay 20 dollars for the ticket." in seen  # the negation removed
    assert any(o.startswith("He did not pay ") and "20" not in o and "dollars" in o for o in seen)  # the number
    assert "He did not pay 20 for the ticket." in seen or "He did not pay 20 dollars for the." in seen  # a word
    assert probe.perturb("Tom is here.", np.random.default_rng(1)) == "Tom isn't here."  # the only change that applies
    assert probe.perturb("Go.", rng) is None and probe.perturb("", rng) is None


def test_scorer_scores_a_pair_alike_alone_and_in_a_padded_batch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    net = probe.make_scorer(rng.normal(size=(50, 8)).astype(np.float32), 6)
    torch.manual_seed(0)
    for p in net.parameters():  # weights away from their initial zeros and symmetries
        if p.requires_grad:
            p.data.normal_(0, 0.5)
    lengths = [0, 1, 3, 7, 12, 2, 5, 50]
    fx = [rng.integers(0, 50, n) for n in lengths]
    en = [rng.integers(0, 50, n) for n in lengths[::-1]]
    batched = probe.score_pairs(net, fx, en, bf16=False, batch=3)
    with torch.no_grad():
        alone = [float(net(*probe.padded([a]), *probe.padded([b]))[0]) for a, b in zip(fx, en)]
        cut = float(net(*probe.padded([fx[-1][:probe.MAX_PIECES]]), *probe.padded([en[-1]]))[0])
    assert np.allclose(batched, alone, atol=1e-5)
    assert abs(cut - alone[-1]) < 1e-5  # only the first MAX_PIECES pieces are read
    assert len(set(np.round(batched, 4))) == len(lengths)  # the pairs are told apart


def test_nearest_others_against_brute_force(monkeypatch):
    pytest.importorskip("faiss")
    monkeypatch.setattr(probe, "BLOCK", 7)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(17, 4)).astype(np.float32)
    y = rng.normal(size=(17, 4)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    keys = [str(i % 5) for i in range(17)]  # rows 0, 5, 10, 15 share a key: never each other's non-translation
    got = probe.nearest_others(x, y, keys, k=3)
    for i in range(17):
        start = i // 7 * 7
        block = [j for j in range(start, min(17, start + 7)) if j != i and keys[j] != keys[i]]
        want = sorted(block, key=lambda j: -float(x[i] @ y[j]))[:3]
        assert list(got[i][got[i] >= 0]) == want


def test_auc_against_counting_pairs():
    rng = np.random.default_rng(2)
    scores = rng.normal(size=40)
    hit = rng.random(40) < 0.3
    slow = np.mean([float(a > b) for a in scores[hit] for b in scores[~hit]])
    assert abs(probe.auc(scores, hit) - slow) < 1e-12
