"""bitextmine.evaluation.sparse_tasks (what tools/sparse_tasks.py runs): mining tasks in which translations are rare, and their precision / recall / F1."""

import numpy as np
import pytest

from bitextmine.evaluation.sparse_tasks import best_f1, build_context_task, evaluate, largest_tasks, prf, write_task
from bitextmine.judge.tasks import CONTAIN, STOPWORDS, PoolTooSmall, Repeats, Task, build_task, clean_pool, key, tokens

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def word(i: int, prefix: str = "") -> str:
    """A distinct made-up word per i (letters only: :func:`key` makes every digit run one 0)."""
    out = ""
    while True:
        out, i = LETTERS[i % 26] + out, i // 26
        if not i:
            return prefix + out


def tiny_pool(n: int = 400, seed: int = 0) -> list[tuple[str, str]]:
    """(foreign, English) pairs of 3-6 made-up words, with planted repeats: English texts that share 4 of 5
    tokens with another pair's (near repeats), foreign texts copied from another pair's English, English
    texts equal to another's up to case and punctuation."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        ws = [word(int(w)) for w in rng.choice(5000, rng.integers(3, 7), replace=False)]
        pairs.append((" ".join(word(i, "f") + w for w in ws), " ".join(ws)))
    for i in range(0, 60, 3):  # English 4 of 5 tokens another pair's: a near repeat
        base = pairs[i][1].split()[:4] + [word(9000 + i)]
        other = pairs[i][1].split()[:4] + [word(9500 + i)]
        pairs[i] = (pairs[i][0], " ".join(base))
        pairs.append((word(i, "q") + " zz", " ".join(other)))
    for i in range(60, 80):  # a foreign text that is another pair's English (a name copied across)
        pairs.append((pairs[i][1].upper(), word(i, "copy") + " of it"))
    for i in range(80, 90):  # the same English up to case and punctuation: left out of the pool
        pairs.append((word(i, "dup") + " x", pairs[i][1].title() + "!"))
    return pairs


def near_repeat(a: str, b: str, near: float = 0.8, contain: float = CONTAIN) -> bool:
    """The slow, obvious version of :class:`Repeats`."""
    ta, tb = set(tokens(a)), set(tokens(b))
    ca, cb = ta - STOPWORDS - {"0"}, tb - STOPWORDS - {"0"}
    small, large = sorted((len(ca), len(cb)))
    contained = contain > 0 and small >= 4 and 2 * small >= large and len(ca & cb) >= contain * small - 1e-9
    return key(a) == key(b) or (bool(ta) and len(ta & tb) >= near * max(len(ta), len(tb)) - 1e-9) or contained


def test_key_folds_case_punctuation_and_digits():
    assert key("Page 3 of 12!") == key("page 7 of 5") == "page 0 of 0"
    assert key("_Open…  File") == "open file"
    assert tokens("X b, x B") == frozenset({"x", "b"})


@pytest.mark.parametrize("contain", [0.0, CONTAIN, 0.5])
def test_repeats_equal_the_slow_pairwise_check(contain):
    rng = np.random.default_rng(1)
    vocab = [word(i) for i in range(12)] + ["the", "of", "said", "in"]  # stopwords are no content
    lines = [" ".join(rng.choice(vocab, rng.integers(1, 9))) for _ in range(300)]
    queries = [" ".join(rng.choice(vocab, rng.integers(1, 9))) for _ in range(300)] + lines[:20] + ["", "!!"]
    index = Repeats(lines[:150], contain=contain)
    for q in queries:
        assert index.find(q) == any(near_repeat(q, x, contain=contain) for x in lines[:150]), q
    found = sum(index.find(q) for q in queries)
    assert found > 30  # the check is not vacuous
    if contain:  # and the containment rule finds more than the near rule alone
        assert found > sum(Repeats(lines[:150], contain=0.0).find(q) for q in queries)


def test_containment_catches_a_headline_and_its_lead_but_not_a_same_template_sentence():
    index = Repeats(["In the US state of Utah, at least 12 people have died as a result of a flood.",
                     "I could have lost my job."])
    assert index.find("Flood kills 12 people in Utah.")
    assert not index.find("I have lost my wallet.")
    assert not index.find("Floods in Utah are rare.")  # 1 content word of 3 shared, and too few
    assert not Repeats(["Over 100 million people"]).find(  # a short line is not contained in any long one
        "In October, the secretary said the pandemic plunged more than 100 million people into poverty.")
    assert not Repeats(["Police said nine million people voted in Paris region elections"]).find(
        "Nine million people")  # too few content words


def test_clean_pool_keeps_one_pair_per_text():
    pool, left = clean_pool([("a", "A"), ("b", "a!"), ("A.", "c"), ("d", "D"), ("", "e"), ("f", "...")])
    assert pool == [("a", "A"), ("d", "D")] and left == 4


def task_checks(task: Task, pool: list[tuple[str, str]], size: int, share: float) -> None:
    """The invariants of a task: sizes, gold share, gold lines are partners, no distractor has a partner or a
    near repeat of one on the other side, lines distinct per side."""
    partner = dict(pool)
    assert len(task.src) == len(task.tgt) == size
    assert len(task.gold) == round(share * size)
    assert task.src_en == [partner[f] for f in task.src]
    assert len({key(x) for x in task.src}) == len({key(x) for x in task.tgt}) == size
    for s, t in task.gold:
        assert partner[task.src[s - 1]] == task.tgt[t - 1]
    gold_src = {s for s, _ in task.gold}
    for s, f in enumerate(task.src, 1):
        if s in gold_src:
            continue
        assert not any(near_repeat(partner[f], e) or near_repeat(f, e) for e in task.tgt), f


@pytest.mark.parametrize("share", [0.01, 0.03, 0.1, 0.5])
def test_task_gold_share_partners_and_repeats(share):
    pool, left = clean_pool(tiny_pool())
    assert left == 10
    task = build_task(pool, 100, share, np.random.default_rng(0))
    task_checks(task, pool, 100, share)
    big = build_task(pool, 180, share, np.random.default_rng(0))
    task_checks(big, pool, 180, share)
    assert sum(big.dropped.values()) > 0  # the planted repeats met the rules


def test_a_filled_task_takes_its_gold_from_the_pool_and_its_distractors_from_both():
    pool, _ = clean_pool(tiny_pool(200, seed=0))
    filler, _ = clean_pool(tiny_pool(400, seed=1)[:400])
    pairs, _ = clean_pool(pool + filler)
    n = sum(1 for p in pairs if p in set(pool))
    assert pairs[:n] == [p for p in pairs if p in set(pool)]
    task = build_task(pairs, 300, 0.1, np.random.default_rng(3), gold_from=n)
    task_checks(task, pairs, 300, 0.1)
    gold_fx = {task.src[s - 1] for s, _ in task.gold}
    assert gold_fx <= {f for f, _ in pairs[:n]}
    from_filler = [f for f in task.src if f not in gold_fx and f in {f for f, _ in pairs[n:]}]
    from_pool = [f for f in task.src if f not in gold_fx and f in {f for f, _ in pairs[:n]}]
    assert from_filler and from_pool
    with pytest.raises(PoolTooSmall):  # gold never comes from the filler
        build_task(pairs, 400, 0.9, np.random.default_rng(3), gold_from=n)


def test_each_repeat_rule_drops_something_over_draws():
    pool, _ = clean_pool(tiny_pool())
    total = dict.fromkeys(build_task(pool, 150, 0.5, np.random.default_rng(0)).dropped, 0)
    for seed in range(20):
        for share in (0.1, 0.5):
            task = build_task(pool, 150, share, np.random.default_rng(seed))
            for k, v in task.dropped.items():
                total[k] += v
    for rule in ("gold English repeats a gold English", "English distractor repeats a gold text",
                 "foreign distractor's English repeats an English line", "foreign distractor repeats an English line"):
        assert total[rule] > 0, rule


def test_tasks_are_deterministic_per_seed(tmp_path):
    pool, _ = clean_pool(tiny_pool())
    a, b = (build_task(pool, 120, 0.1, np.random.default_rng([3, 1])) for _ in range(2))
    c = build_task(pool, 120, 0.1, np.random.default_rng([3, 2]))
    assert (a.src, a.tgt, a.gold, a.dropped) == (b.src, b.tgt, b.gold, b.dropped)
    assert a.src != c.src
    write_task(a, str(tmp_path / "t"))
    assert (tmp_path / "t" / "src.txt").read_text(encoding="utf-8").splitlines() == a.src
    rows = (tmp_path / "t" / "gold.tsv").read_text(encoding="utf-8").splitlines()
    assert {tuple(map(int, r.split("\t"))) for r in rows} == a.gold


def test_a_pool_too_small_is_refused_and_the_largest_task_fits():
    pool, _ = clean_pool(tiny_pool())
    with pytest.raises(PoolTooSmall):
        build_task(pool, 300, 0.01, np.random.default_rng(0))
    size, tasks = largest_tasks(pool, 0.1, [[0, 1], [0, 2], [0, 3]])
    assert size * (2 - 0.1) <= len(pool) and len(tasks) == 3
    for task in tasks:
        task_checks(task, pool, size, 0.1)
    with pytest.raises(PoolTooSmall):
        build_task(pool, int(size / 0.97) + 1, 0.1, np.random.default_rng([0, 1]))


def slow_prf(printed, gold):
    right = sum(1 for p in printed if p in gold)
    p = right / len(printed) if printed else 0.0
    r = right / len(gold) if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def test_prf_and_best_threshold_equal_the_slow_reference():
    rng = np.random.default_rng(0)
    for trial in range(50):
        n = int(rng.integers(0, 40))
        gold = {(int(i), int(i)) for i in rng.choice(100, int(rng.integers(1, 30)), replace=False)}
        printed = [(int(s), int(t)) for s, t in zip(rng.choice(100, n, replace=False), rng.integers(0, 100, n))]
        printed[: n // 2] = [(s, s) for s, _ in printed[: n // 2]]  # some right
        assert np.allclose(prf(printed, gold), slow_prf(printed, gold))
        scores = np.round(rng.random(n), 1)  # ties
        hit = np.array([p in gold for p in printed], bool)
        best = max([slow_prf([p for p, s in zip(printed, scores) if s >= thr], gold)[2] for thr in set(scores)],
                   default=0.0)
        f, thr = best_f1(scores, hit, len(gold))
        assert np.isclose(f, best)
        if best > 0:
            assert np.isclose(slow_prf([p for p, s in zip(printed, scores) if s >= thr], gold)[2], best)


def test_evaluate_scores_mine_output_against_gold(tmp_path, toy_model):
    from conftest import toy_corpus

    src, tgt = toy_corpus(400, seed=7)  # pairs the toy model never saw
    pool, _ = clean_pool(list(zip(src, tgt)))
    task = build_task(pool, 60, 0.5, np.random.default_rng(0))
    write_task(task, str(tmp_path / "t"))
    res = evaluate(str(tmp_path / "t"), task, toy_model)
    assert res["printed"] > 0 and res["oracle_margin"][0] > 0.5
    right = res["printed"] - len(res["wrong"])
    assert np.isclose(res["p"], right / res["printed"]) and np.isclose(res["r"], right / len(task.gold))
    assert res["oracle_floors"][0] >= res["f1"] - 1e-9  # the same floors, every threshold: mine's is one


def test_tokens_make_english_spellings_of_one_sentence_one():
    assert tokens("What're you watching?") == tokens("What are you watching?")
    assert tokens("Is everybody OK?") == tokens("is everybody okay")
    assert tokens("I can't swim.") == tokens("I cannot swim.") == tokens("I can not swim") != tokens("I can swim.")
    assert tokens("Tom won’t go to the station.") == tokens("Tom will not go to station")
    assert Repeats(["Where's everybody else?"]).find("Where's everyone else?")


def test_context_tasks_take_their_distractors_around_the_gold_pairs_in_the_same_test_set():
    pairs = tiny_pool(600, seed=2)
    news, _ = clean_pool(pairs)
    origins = ["a"] * 300 + ["b"] * (len(news) - 300)
    rng = np.random.default_rng(5)
    held = sorted(int(i) for i in rng.choice(len(news), 60, replace=False))
    task = build_context_task(news, origins, held, 80, 0.1, np.random.default_rng(1))
    task_checks(task, news, 80, 0.1)
    where_fx = {f: i for i, (f, _) in enumerate(news)}
    where_en = {e: i for i, (_, e) in enumerate(news)}
    gold = {where_fx[task.src[s - 1]] for s, _ in task.gold}
    assert gold <= set(held) and {where_en[task.tgt[t - 1]] for _, t in task.gold} == gold
    fx = [where_fx[f] for f in task.src if where_fx[f] not in gold]
    en = [where_en[e] for e in task.tgt if where_en[e] not in gold]
    assert all(i % 2 == 0 for i in fx) and all(i % 2 == 1 for i in en)  # one side of each line: no partner
    for i in fx + en:  # near a gold pair of its own test set
        near = min(abs(i - k) for k in gold if origins[k] == origins[i])
        assert near <= 80
    assert np.mean([min(abs(i - k) for k in gold) for i in fx + en]) < 10  # nearest first
    with pytest.raises(PoolTooSmall):
        build_context_task(news, origins, held, 80, 0.9, np.random.default_rng(1))
