import io

import numpy as np
import pytest

from bitextmine.config import MODES, MineConfig
from bitextmine.mining.mine import mine_embeddings
from bitextmine.mining.select import greedy_one_to_one
from bitextmine.pipeline import mine_files


def unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def reference_z(sim, i, j):
    """The standout of pair (i, j) in the similarity matrix sim: the mean over both sentences of how many
    (population) standard deviations sim[i, j] lies above the sentence's other similarities."""
    row, col = np.delete(sim[i], j), np.delete(sim[:, j], i)
    if len(row) < 2 or len(col) < 2:
        return np.inf
    return ((sim[i, j] - row.mean()) / row.std() + (sim[i, j] - col.mean()) / col.std()) / 2


def reference_mine(x, y, k, margin, mode, threshold, min_cosine=-np.inf, min_z=0.0):
    """Slow, obvious version: full similarity matrix, loops, LASER's candidate loop for 'max'; every floor
    drops candidates before the mode selects among them."""
    sim = x.astype(np.float64) @ y.T.astype(np.float64)
    k = min(k, len(y), len(x))
    mx = np.array([np.sort(sim[i])[::-1][:k].mean() for i in range(len(x))])
    my = np.array([np.sort(sim[:, j])[::-1][:k].mean() for j in range(len(y))])

    def score(i, j):
        c, avg = sim[i, j], (mx[i] + my[j]) / 2
        return {"ratio": c / avg, "distance": c - avg, "absolute": c}[margin]

    fwd = {}
    for i in range(len(x)):
        cands = np.argsort(-sim[i], kind="stable")[:k]
        j = max(cands, key=lambda j: score(i, j))
        fwd[(i, int(j))] = score(i, j)
    bwd = {}
    for j in range(len(y)):
        cands = np.argsort(-sim[:, j], kind="stable")[:k]
        i = max(cands, key=lambda i: score(i, j))
        bwd[(int(i), j)] = score(i, j)

    def passes(p, s):
        return s >= threshold and sim[p] >= min_cosine and (min_z <= 0 or reference_z(sim, *p) >= min_z)

    fwd = {p: s for p, s in fwd.items() if passes(p, s)}
    bwd = {p: s for p, s in bwd.items() if passes(p, s)}
    if mode == "forward":
        pairs = fwd
    elif mode == "backward":
        pairs = bwd
    elif mode == "intersect":
        pairs = {p: s for p, s in fwd.items() if p in bwd}
    elif mode == "union":
        pairs = {**fwd, **bwd}
    else:
        pairs, seen_s, seen_t = {}, set(), set()
        for (i, j), s in sorted(list(fwd.items()) + list(bwd.items()), key=lambda e: -e[1]):
            if i not in seen_s and j not in seen_t:
                seen_s.add(i)
                seen_t.add(j)
                pairs[(i, j)] = s
    return pairs


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
@pytest.mark.parametrize("min_z", [0.0, 2.5])  # 2.5: about half the pairs stand out enough
def test_mine_embeddings_matches_reference(mode, margin, min_z):
    rng = np.random.default_rng(7)
    n, m, d = 60, 45, 16
    x = unit(rng.normal(size=(n, d)))
    y = unit(rng.normal(size=(m, d)))
    y[:30] = unit(x[10:40] + rng.normal(scale=0.3, size=(30, d)))  # planted: x[10+i] ~ y[i]
    threshold = {"ratio": 1.0, "distance": 0.0, "absolute": 0.3}[margin]
    got = mine_embeddings(x, y, config=MineConfig(k=4, margin=margin, mode=mode, threshold=threshold, block_size=13,
                                                  min_cosine=0.35, min_z=min_z))
    want = reference_mine(x, y, 4, margin, mode, threshold, 0.35, min_z)
    assert {(int(s), int(t)) for s, t in zip(got.src, got.tgt)} == set(want)
    assert 15 <= len(want) <= 80
    for s, t, sc in zip(got.src, got.tgt, got.score):
        assert sc == pytest.approx(want[(int(s), int(t))], rel=1e-4, abs=1e-5)
    np.testing.assert_allclose(got.cosine, (x[got.src] * y[got.tgt]).sum(1), atol=1e-5)
    assert np.all(np.diff(got.score) <= 0)  # best first


@pytest.mark.parametrize("mode", MODES)
def test_planted_pairs_are_found_and_noise_is_rejected(mode):
    rng = np.random.default_rng(1)
    d = 32
    x = unit(rng.normal(size=(200, d)))
    y = unit(rng.normal(size=(150, d)))
    planted = {(5 * i, 3 * i) for i in range(40)}
    for i, j in planted:
        y[j] = unit((x[i] + rng.normal(scale=0.05, size=d))[None])[0]
    got = mine_embeddings(x, y, config=MineConfig(mode=mode, threshold=1.5))
    found = {(int(s), int(t)) for s, t in zip(got.src, got.tgt)}
    assert found == planted


def test_block_size_does_not_change_the_result():
    rng = np.random.default_rng(2)
    x, y = unit(rng.normal(size=(300, 8))), unit(rng.normal(size=(250, 8)))
    a = mine_embeddings(x, y, config=MineConfig(threshold=0, block_size=7))
    b = mine_embeddings(x, y, config=MineConfig(threshold=0, block_size=100000))
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.tgt, b.tgt)


def greedy_loop(src, tgt, score):
    order = sorted(range(len(score)), key=lambda c: (-score[c], c))
    used_s, used_t, keep = set(), set(), []
    for c in order:
        if src[c] not in used_s and tgt[c] not in used_t:
            used_s.add(src[c])
            used_t.add(tgt[c])
            keep.append(c)
    return sorted(keep)


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_greedy_equals_loop(seed):
    rng = np.random.default_rng(seed)
    c = 300
    src, tgt = rng.integers(0, 40, c), rng.integers(0, 35, c)
    score = rng.integers(0, 20, c).astype(np.float32)  # many ties
    assert greedy_one_to_one(src, tgt, score).tolist() == greedy_loop(src, tgt, score)


def test_mine_files_duplicates_keep_all_ids(tmp_path, toy_model):
    from conftest import toy_corpus, write_lines

    src, tgt = toy_corpus(n=60, seed=42)
    s_lines = src[:30] + [src[3], ""] + src[30:40]  # a duplicate line and an empty one
    t_lines = tgt[:30][::-1]
    sp = write_lines(tmp_path / "s.txt", s_lines)
    tp = write_lines(tmp_path / "t.txt", t_lines)
    out = io.StringIO()
    stats = mine_files(sp, tp, out, model=toy_model, config=MineConfig(threshold=0, min_z=0), ids=True)
    rows = [r.split("\t") for r in out.getvalue().splitlines()]
    assert stats.src_lines == 42 and stats.src_unique == 40 and stats.src_empty == 1
    by_src = {r[1]: r for r in rows}
    assert by_src[src[3]][3] == "4,31"  # both line numbers of the duplicate
    # the planted translations come out paired with their own line numbers
    correct = sum(1 for r in rows if r[2] == tgt[src.index(r[1])]) if rows else 0
    assert correct >= 25


@pytest.mark.parametrize("index", ["flat", "ivf"])
def test_same_pairs_as_the_laser_style_baseline_in_tools(index, tmp_path):
    """tools/baseline_mine.py (Python loops, as LASER's mine.py), run as the script it is, and
    mine_embeddings with the same search give the same pairs and scores."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    base = rng.normal(size=(600, 16))
    x = base + 0.5 * rng.normal(size=base.shape)
    y = np.concatenate([base[:300] + 0.5 * rng.normal(size=(300, 16)), rng.normal(size=(400, 16))])
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    y = (y / np.linalg.norm(y, axis=1, keepdims=True)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    script = os.path.join(os.path.dirname(__file__), "..", "tools", "baseline_mine.py")
    subprocess.run([sys.executable, script, str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), str(tmp_path / "out.tsv"),
                    "--k", "4", "--threshold", "1.0", "--index", index, "--nlist", "16", "--nprobe", "4"],
                   check=True, capture_output=True)
    want = [line.split("\t") for line in open(tmp_path / "out.tsv").read().splitlines()]
    got = mine_embeddings(x, y, config=MineConfig(threshold=1.0, min_cosine=-1.0, min_z=0, index=index, nlist=16,
                                                  nprobe=4, device="cpu"))
    assert len(want) > 100
    assert {(int(a), int(b)) for _, a, b in want} == set(zip(got.src.tolist(), got.tgt.tolist()))
    np.testing.assert_allclose(sorted(float(s) for s, _, _ in want), sorted(got.score.tolist()), atol=1e-6)


@pytest.mark.parametrize("shard_rows", [7, 100, 1000])
def test_sharded_search_gives_the_same_pairs_and_scores(shard_rows):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(300, 12)).astype(np.float32)
    y = rng.normal(size=(250, 12)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    whole = mine_embeddings(x, y, config=MineConfig(threshold=0, device="cpu"))
    sharded = mine_embeddings(x, y, config=MineConfig(threshold=0, device="cpu", shard_rows=shard_rows, block_size=13))
    np.testing.assert_array_equal(sharded.src, whole.src)
    np.testing.assert_array_equal(sharded.tgt, whole.tgt)
    np.testing.assert_allclose(sharded.score, whole.score, rtol=1e-6)


def with_cosines(S):
    """Unit rows x (n, n + m) and y (m, n + m) whose cosines x @ y.T are S (n, m) (columns of S with squares
    summing to at most 1): x_i = e_i, y_j = S[:, j] on the first n axes and the rest of its length on its own."""
    n, m = S.shape
    x = np.eye(n, n + m)
    y = np.zeros((m, n + m))
    y[:, :n] = S.T
    y[np.arange(m), n + np.arange(m)] = np.sqrt(1 - (S**2).sum(0))
    return x.astype(np.float32), y.astype(np.float32)


# sources x0 x1 x2, targets: decoy, real (x0's translation), other (x1's); k = 2. The decoy is far from
# everything else, so its low neighbour mean gives (x0, decoy) a higher margin (1.30 at cosine 0.35) than
# the real pair (1.25 at cosine 0.60), which only the target's direction proposes.
FLOORED_DECOY = np.array([[0.35, 0.60, 0.0],
                          [-0.223, 0.37, 0.5],
                          [-0.223, 0.10, 0.0]])


def test_a_candidate_the_floors_drop_does_not_take_the_real_pairs_place():
    x, y = with_cosines(FLOORED_DECOY)
    config = MineConfig(k=2, threshold=1.0, min_cosine=0.4, min_z=0, mode="max")
    got = mine_embeddings(x, y, config=config)
    assert list(zip(got.src.tolist(), got.tgt.tolist())) == [(1, 2), (0, 1)]  # the real pair is kept
    # means: x0 (0.60 + 0.35) / 2, x1 (0.5 + 0.37) / 2, real (0.60 + 0.37) / 2, other (0.5 + 0) / 2
    np.testing.assert_allclose(got.score, [0.5 / ((0.435 + 0.25) / 2), 0.6 / ((0.475 + 0.485) / 2)], rtol=1e-5)
    without = mine_embeddings(x, y, config=MineConfig(k=2, threshold=1.0, min_cosine=-1, min_z=0, mode="max"))
    decoy = [sc for s, t, sc in zip(without.src, without.tgt, without.score) if (s, t) == (0, 0)]
    assert decoy == [pytest.approx(1.30, abs=1e-3)]  # without the floor the decoy wins x0


def test_every_floor_comes_before_the_one_to_one_selection():
    from bitextmine.mining.select import finish

    # source 0's own candidate: margin 1.30 at cosine 0.35; target 2's: source 0 at 1.25, cosine 0.60
    f = (np.array([0]), np.array([1]), np.array([1.30], np.float32), np.array([0.35], np.float32))
    b = (np.array([0, 0]), np.array([1, 2]), np.array([1.30, 1.25], np.float32), np.array([0.35, 0.60], np.float32))
    s, t, sc, cos, origin, z, _ = finish(f, b, MineConfig(threshold=1.0, min_cosine=0.4, min_z=0))
    assert (s.tolist(), t.tolist(), origin.tolist()) == ([0], [2], [1]) and np.isnan(z).all()
    # the standout floor: z of each candidate, asked for once per distinct pair
    asked = []

    def standout(s, t, cos):
        asked.append(list(zip(s.tolist(), t.tolist())))
        return np.where(cos < 0.5, 2.0, 9.0).astype(np.float32)

    s, t, _, _, _, z, _ = finish(f, b, MineConfig(threshold=1.0, min_cosine=0, min_z=4.5), standout)
    assert (s.tolist(), t.tolist(), z.tolist()) == ([0], [2], [9.0])
    assert sorted(asked[0]) == [(0, 1), (0, 2)]


@pytest.mark.parametrize("mode", ["max", "union", "forward", "backward"])
def test_the_rules_screen_comes_before_the_one_to_one_selection(mode):
    """A candidate the rules refuse (mine --rules) does not take its sentences in mode max: source 0's best,
    target 1, breaks a rule; target 2's best, source 0, does not and is chosen. The screen is asked once per
    distinct pair, after the floors (target 3's candidate, below the threshold, is never asked about)."""
    from bitextmine.mining.select import finish

    f = (np.array([0]), np.array([1]), np.array([2.0], np.float32), np.array([0.8], np.float32))
    b = (np.array([0, 0, 0]), np.array([1, 2, 3]), np.array([2.0, 1.6, 0.9], np.float32),
         np.array([0.8, 0.7, 0.6], np.float32))
    config = MineConfig(threshold=1.0, min_cosine=0, min_z=0, mode=mode)
    asked = []

    def screen(s, t):
        asked.append(sorted(zip(s.tolist(), t.tolist())))
        return t != 1

    plain = finish(f, b, config)
    screened = finish(f, b, config, screen=screen)
    assert asked == [[(0, 1), (0, 2)]]
    assert list(zip(plain[0].tolist(), plain[1].tolist())) == {"max": [(0, 1)], "union": [(0, 1), (0, 2)],
                                                              "forward": [(0, 1)], "backward": [(0, 1), (0, 2)]}[mode]
    want = {"max": [(0, 2)], "union": [(0, 2)], "forward": [], "backward": [(0, 2)]}[mode]
    assert list(zip(screened[0].tolist(), screened[1].tolist())) == want


def test_the_staged_run_keeps_the_real_pair_too(tmp_path):
    from conftest import write_lines

    x, y = with_cosines(FLOORED_DECOY)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    sp = write_lines(tmp_path / "s.txt", ["x0", "x1", "x2"])
    tp = write_lines(tmp_path / "t.txt", ["decoy", "real", "other"])
    out = io.StringIO()
    mine_files(sp, tp, out, config=MineConfig(k=2, threshold=1.0, min_cosine=0.4, min_z=0),
               src_emb=str(tmp_path / "x.npy"), tgt_emb=str(tmp_path / "y.npy"), explain=True)
    rows = [r.split("\t") for r in out.getvalue().splitlines()]
    assert [(r[1], r[2], r[8]) for r in rows] == [("x1", "other", "both"), ("x0", "real", "bwd")]
    assert abs(float(rows[1][0]) - 1.25) < 1e-3 and abs(float(rows[1][5]) - 0.60) < 1e-5


@pytest.mark.parametrize("seed", range(8))
def test_greedy_equals_the_loop_on_random_candidates_with_ties(seed):
    rng = np.random.default_rng(100 + seed)
    c = int(rng.integers(1, 400))
    hi = int(rng.integers(1, 60))
    src, tgt = rng.integers(0, hi, c), rng.integers(0, int(rng.integers(1, 60)), c)
    score = np.round(rng.normal(size=c), int(rng.integers(0, 3))).astype(np.float32)  # coarse values: ties
    assert greedy_one_to_one(src, tgt, score).tolist() == greedy_loop(src, tgt, score)
    assert greedy_one_to_one(src[:0], tgt[:0], score[:0]).tolist() == []


def test_greedy_on_a_chain_of_candidates_is_fast():
    import time

    # candidate 2i = (i, i), 2i + 1 = (i + 1, i), scores falling along the chain: each one blocks the next
    # but one, and only the head of the chain ranks first at both its endpoints
    c = 100_000
    i = np.arange(c)
    src, tgt = (i + 1) // 2, i // 2
    score = np.linspace(2, 1, c).astype(np.float64)
    t0 = time.perf_counter()
    got = greedy_one_to_one(src, tgt, score)
    assert time.perf_counter() - t0 < 10  # the former rounds took one round per two candidates here
    np.testing.assert_array_equal(got, np.arange(0, c, 2))
    rng = np.random.default_rng(0)
    perm = rng.permutation(c)  # any order of the input
    assert greedy_one_to_one(src[perm], tgt[perm], score[perm]).tolist() == sorted(np.argsort(perm)[got].tolist())


def test_mining_embeddings_does_not_import_the_staged_run():
    import subprocess
    import sys

    code = ("import sys, bitextmine.mining.mine; assert 'bitextmine.pipeline' not in sys.modules; "
            "from bitextmine.mining import mine_files; from bitextmine.pipeline import mine_files as m, MineStats; "
            "assert mine_files is m; import bitextmine.pipeline.run")
    subprocess.run([sys.executable, "-c", code], check=True)
    subprocess.run([sys.executable, "-c", "import bitextmine.pipeline.run, bitextmine.mining"], check=True)
