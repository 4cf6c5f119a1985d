"""IBM model 1 tables (bitextmine/lexicon/ibm1.py) against a slow pure-Python model 1."""

from __future__ import annotations

import io
import json
import math
import os
from collections import defaultdict

import numpy as np
import pytest

from bitextmine.errors import ConfigError, ModelFormatError
from bitextmine.lexicon import (LexicalTable, best_links, expected_links, load_table, save_table, score,
                                score_and_links, score_both, token_links, train_ibm1, vocabulary_fingerprint)
from bitextmine.lexicon.ibm1 import DEFICIT_BIG
from conftest import toy_corpus


def flat(sentences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The tokenizer's flat layout: (ids int64 (total,), offsets int64 (n,))."""
    lengths = np.array([len(s) for s in sentences], np.int64)
    ids = np.array([i for s in sentences for i in s], np.int64)
    return ids, np.cumsum(lengths) - lengths


def reference_ibm1(pairs, vocab_src: int, iters: int, null: bool) -> dict:
    """Model 1 by the book (Brown et al. 1993, Koehn's pseudo-code): dicts, one loop per token."""
    pairs = [(e, f) for e, f in pairs if f and (e or null)]
    es_of = [list(e) + ([vocab_src] if null else []) for e, _ in pairs]
    t = {(e, fj): 1.0 for es, (_, f) in zip(es_of, pairs) for fj in f for e in es}
    for _ in range(iters):
        count, total = defaultdict(float), defaultdict(float)
        for es, (_, f) in zip(es_of, pairs):
            for fj in f:
                z = sum(t[(e, fj)] for e in es)
                for e in es:
                    count[(e, fj)] += t[(e, fj)] / z
                    total[e] += t[(e, fj)] / z
        t = {k: count[k] / total[k[0]] for k in t}
    return t


def reference_score(t: dict, pairs, vocab_src: int, null: bool, min_prob: float) -> list[float]:
    out = []
    for e, f in pairs:
        es = list(e) + ([vocab_src] if null else [])
        if not f:
            out.append(math.log(min_prob))
            continue
        logs = [math.log(max(sum(t.get((ei, fj), 0.0) for ei in es) / max(len(es), 1), min_prob)) for fj in f]
        out.append(sum(logs) / len(f))
    return out


def random_pairs(n: int, vocab_src: int, vocab_tgt: int, seed: int, max_len: int = 6):
    """Random pairs with repeated tokens, empty sources and empty targets among them."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, vocab_src, rng.integers(0, max_len + 1)).tolist(),
             rng.integers(0, vocab_tgt, rng.integers(0, max_len + 1)).tolist()) for _ in range(n)]


def as_dict(table: LexicalTable) -> dict:
    return {(int(k) // table.vocab_tgt, int(k) % table.vocab_tgt): float(p) for k, p in zip(table.keys, table.prob)}


def train(pairs, vocab_src, vocab_tgt, **kw) -> LexicalTable:
    src, tgt = flat([e for e, _ in pairs]), flat([f for _, f in pairs])
    return train_ibm1(*src, *tgt, vocab_src, vocab_tgt, **kw)


@pytest.mark.parametrize("null", [True, False])
@pytest.mark.parametrize("iters", [1, 2, 5])
@pytest.mark.parametrize("batch", [1, 13, 1 << 20])
def test_em_equals_reference(null, iters, batch):
    pairs = random_pairs(60, 9, 7, seed=iters + 10 * null)
    ref = reference_ibm1(pairs, 9, iters, null)
    table = train(pairs, 9, 7, iters=iters, null=null, floor=0.0, batch=batch)
    got = as_dict(table)
    assert set(got) == set(ref)
    assert max(abs(got[k] - ref[k]) for k in ref) < 1e-6
    assert table.null == null and table.iters == iters


def test_em_float64_before_rounding_and_rows_sum_to_one():
    """Before pruning each source's t(.|e) sums to 1 (an M-step), including NULL's row."""
    pairs = random_pairs(80, 12, 10, seed=3)
    table = train(pairs, 12, 10, iters=4, floor=0.0)
    sums = np.bincount(table.keys // 10, weights=table.prob.astype(np.float64), minlength=13)
    used = np.bincount(table.keys // 10, minlength=13) > 0
    np.testing.assert_allclose(sums[used], 1.0, atol=1e-6)
    assert used[12]  # the NULL row


def test_pruning_keeps_entries_at_or_above_the_floor():
    pairs = random_pairs(80, 12, 10, seed=4)
    full = as_dict(train(pairs, 12, 10, floor=0.0))
    pruned = as_dict(train(pairs, 12, 10, floor=0.05))
    assert set(pruned) == {k for k, v in full.items() if v >= 0.05}
    assert 0 < len(pruned) < len(full)
    assert all(pruned[k] == pytest.approx(full[k], abs=1e-7) for k in pruned)


def test_long_pairs_are_left_out_of_training():
    pairs = random_pairs(40, 8, 8, seed=5, max_len=9)
    short = [(e, f) for e, f in pairs if len(e) <= 5 and len(f) <= 5]
    assert len(short) < len(pairs)
    got = as_dict(train(pairs, 8, 8, floor=0.0, max_len=5))
    ref = reference_ibm1(short, 8, 5, True)
    assert set(got) == set(ref) and max(abs(got[k] - ref[k]) for k in ref) < 1e-6


def test_deterministic_and_batching_does_not_change_the_table():
    pairs = random_pairs(200, 30, 25, seed=6, max_len=10)
    a, b = train(pairs, 30, 25), train(pairs, 30, 25)
    assert a.keys.tobytes() == b.keys.tobytes() and a.prob.tobytes() == b.prob.tobytes()
    c = train(pairs, 30, 25, batch=50)
    np.testing.assert_array_equal(a.keys, c.keys)
    np.testing.assert_allclose(a.prob, c.prob, rtol=1e-6)


@pytest.mark.parametrize("null", [True, False])
def test_score_equals_reference(null):
    pairs = random_pairs(50, 9, 7, seed=7)
    table = train(pairs, 9, 7, iters=3, null=null, floor=0.02)
    test = random_pairs(30, 9, 7, seed=8)
    ref = reference_score(as_dict(table), test, 9, null, 1e-6)
    src, tgt = flat([e for e, _ in test]), flat([f for _, f in test])
    for batch in (1, 7, 1 << 20):
        got = score(table, src, tgt, min_prob=1e-6, batch=batch)
        assert got.dtype == np.float32 and got.shape == (30,)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def reference_best_links(t: dict, pairs, thresholds, min_prob: float) -> list[list[float]]:
    """Each target token's best link max_e t(f|e) over the source (no NULL), one loop per token."""
    out = []
    for e, f in pairs:
        best = [max((t.get((ei, fj), 0.0) for ei in e), default=0.0) for fj in f]
        if not f:
            out.append([0.0] * len(thresholds) + [math.log(min_prob)])
            continue
        out.append([sum(b >= th for b in best) / len(f) for th in thresholds]
                   + [sum(math.log(max(b, min_prob)) for b in best) / len(f)])
    return out


@pytest.mark.parametrize("null", [True, False])
def test_best_links_equal_reference(null):
    pairs = random_pairs(60, 9, 7, seed=17)
    table = train(pairs, 9, 7, iters=3, null=null, floor=0.01)
    test = random_pairs(40, 9, 7, seed=18, max_len=8)  # empty sources and targets among them
    ref = reference_best_links(as_dict(table), test, (0.05, 0.3), 1e-4)
    src, tgt = flat([e for e, _ in test]), flat([f for _, f in test])
    ref_score = reference_score(as_dict(table), test, 9, null, 1e-6)
    for batch in (1, 9, 1 << 20):
        got = best_links(table, src, tgt, (0.05, 0.3), min_prob=1e-4, batch=batch)
        assert got.shape == (40, 3)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
        both = score_and_links(table, src, tgt, (0.05, 0.3), min_prob=1e-6, link_min_prob=1e-4, batch=batch)
        np.testing.assert_allclose(both[0], ref_score, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(both[1], ref, rtol=1e-6, atol=1e-6)


def reference_deficits(t: dict, pairs, expected, min_prob: float) -> list[list[float]]:
    """Each pair's deficits, token by token: max(0, expected[f] - log(max(best link, min_prob)))."""
    out = []
    for e, f in pairs:
        d = [max(0.0, float(expected[fj]) - math.log(max(max((t.get((ei, fj), 0.0) for ei in e), default=0.0),
                                                          min_prob))) for fj in f]
        out.append([sum(d), max(d, default=0.0), sum(x > DEFICIT_BIG for x in d)])
    return out


def reference_expected(t: dict, pairs, vocab: int, min_prob: float, shrink: float) -> list[float]:
    logs = {f: [] for f in range(vocab)}
    for e, f in pairs:
        for fj in f:
            logs[fj].append(math.log(max(max((t.get((ei, fj), 0.0) for ei in e), default=0.0), min_prob)))
    every = [x for v in logs.values() for x in v]
    overall = sum(every) / len(every)
    return [(sum(logs[f]) + shrink * overall) / (len(logs[f]) + shrink) for f in range(vocab)]


@pytest.mark.parametrize("null", [True, False])
def test_deficits_and_expected_links_equal_reference(null):
    pairs = random_pairs(60, 9, 7, seed=27)
    table = train(pairs, 9, 7, iters=3, null=null, floor=0.01)
    src, tgt = flat([e for e, _ in pairs]), flat([f for _, f in pairs])
    expected = expected_links(table, src, tgt, min_prob=1e-4, shrink=3.0)
    assert expected.dtype == np.float32 and expected.shape == (7,)
    np.testing.assert_allclose(expected, reference_expected(as_dict(table), pairs, 7, 1e-4, 3.0), rtol=1e-5)
    test = random_pairs(40, 9, 7, seed=28, max_len=8)  # empty sources and targets among them
    ref = reference_deficits(as_dict(table), test, expected, 1e-4)
    ref_links = reference_best_links(as_dict(table), test, (0.05, 0.3), 1e-4)
    src, tgt = flat([e for e, _ in test]), flat([f for _, f in test])
    for batch in (1, 9, 1 << 20):
        _, got = score_and_links(table, src, tgt, (0.05, 0.3), link_min_prob=1e-4, batch=batch, expected=expected)
        assert got.shape == (40, 6)
        np.testing.assert_allclose(got[:, :3], ref_links, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[:, 3:], ref, rtol=1e-5, atol=1e-5)
    assert (np.array(ref)[:, 0] > 0).any()
    # a target side whose offsets start past some ids: its links and ids are those of its own pairs
    ids, offsets = tgt
    shifted = (np.r_[[0, 1], ids], np.asarray(offsets) + 2)
    links, got_ids = token_links(table, src, shifted)
    assert len(links) == len(got_ids) == len(ids) and got_ids.tolist() == list(ids)
    assert links.tolist() == token_links(table, src, tgt)[0].tolist()


def lookup_pair_by_pair(table: LexicalTable, e: list[int], f: list[int], min_prob: float) -> float:
    """A pair's score with one lookup per (source or NULL, target token), summed in order in float64."""
    es = np.array(e + ([table.vocab_src] if table.null else []), np.int64)
    logs = [np.log(max(sum(table.lookup(es, np.full(len(es), fj)).tolist()) / max(len(es), 1), min_prob))
            for fj in f]
    return sum(logs) / len(f) if f else np.log(min_prob)


@pytest.mark.parametrize("null", [True, False])
def test_score_with_repeated_pieces_equals_pair_by_pair(null):
    """Sentences of up to 40 pieces from 3 ids (each target piece repeats, computed once per sentence):
    the batch scores byte for byte as each pair scored alone, and as the reference."""
    table = train(random_pairs(60, 5, 5, seed=3, max_len=12), 5, 5, iters=2, null=null, floor=0.0)
    test = random_pairs(40, 3, 3, seed=4, max_len=40) + [([], [2, 2, 2]), ([1, 1], []), ([0, 0, 0], [1, 1])]
    ref = reference_score(as_dict(table), test, 5, null, 1e-6)
    alone = np.array([score(table, flat([e]), flat([f]), min_prob=1e-6)[0] for e, f in test], np.float32)
    assert alone.tobytes() == np.array([lookup_pair_by_pair(table, e, f, 1e-6) for e, f in test], np.float32).tobytes()
    src, tgt = flat([e for e, _ in test]), flat([f for _, f in test])
    for batch in (1, 50, 1 << 20):
        got = score(table, src, tgt, min_prob=1e-6, batch=batch)
        assert got.tobytes() == alone.tobytes()
    np.testing.assert_allclose(alone, ref, rtol=1e-6, atol=1e-6)
    assert max(len(set(f)) < len(f) for _, f in test)


def toy_ids(n: int, seed: int, noise: float = 0.2):
    """A made-up language pair over ids: each source word has one translation (a fixed permutation), target
    sentences are the translations in another order with a share of words replaced by random ones."""
    rng = np.random.default_rng(seed)
    perm = np.random.default_rng(99).permutation(300)
    pairs = []
    for _ in range(n):
        e = rng.integers(0, 300, rng.integers(3, 10))
        f = perm[e][rng.permutation(len(e))]
        f = np.where(rng.random(len(f)) < noise, rng.integers(0, 300, len(f)), f)
        pairs.append((e.tolist(), f.tolist()))
    return pairs


def gold_beats_shuffled(table_fwd, table_bwd, pairs, seed: int) -> tuple[float, float]:
    src, tgt = flat([e for e, _ in pairs]), flat([f for _, f in pairs])
    order = np.random.default_rng(seed).permutation(len(pairs))
    order = np.where(order == np.arange(len(pairs)), np.roll(order, 1), order)  # no pair keeps its target
    wrong = flat([pairs[i][1] for i in order])
    gold, shuffled = score_both(table_fwd, table_bwd, src, tgt), score_both(table_fwd, table_bwd, src, wrong)
    assert gold.shape == (len(pairs), 2) and gold.dtype == np.float32
    return float((gold[:, 0] > shuffled[:, 0]).mean()), float((gold.sum(1) > shuffled.sum(1)).mean())


def test_translations_score_above_shuffled_pairs():
    train_pairs, test_pairs = toy_ids(3000, seed=1), toy_ids(300, seed=2)
    fwd = train(train_pairs, 300, 300)
    bwd = train([(f, e) for e, f in train_pairs], 300, 300)
    one_way, both = gold_beats_shuffled(fwd, bwd, test_pairs, seed=3)
    assert one_way > 0.97 and both > 0.97
    # the learnt translations are the most probable target of most words
    perm = np.random.default_rng(99).permutation(300)
    best = [int(fwd.keys[fwd.keys // 300 == e][fwd.prob[fwd.keys // 300 == e].argmax()] % 300) for e in range(300)]
    assert np.mean(np.array(best) == perm) > 0.95


def test_translations_score_above_shuffled_pairs_over_pieces():
    """The intended input: the bundled model's SentencePiece pieces of a made-up language pair."""
    from bitextmine.model import default_model_dir
    from bitextmine.tokenizer import Tokenizer

    tok = Tokenizer.load(os.path.join(default_model_dir(), Tokenizer.filename))
    src, tgt = toy_corpus(2000, seed=0)
    fwd = train_ibm1(*tok.encode(src), *tok.encode(tgt), tok.vocab_size, tok.vocab_size,
                     fingerprint=vocabulary_fingerprint(tok.proto))
    bwd = train_ibm1(*tok.encode(tgt), *tok.encode(src), tok.vocab_size, tok.vocab_size)
    test_src, test_tgt = toy_corpus(200, seed=5)
    pairs = list(zip(tok.encode_lists(test_src), tok.encode_lists(test_tgt)))
    one_way, both = gold_beats_shuffled(fwd, bwd, [(e.tolist(), f.tolist()) for e, f in pairs], seed=4)
    assert one_way > 0.95 and both > 0.95
    assert fwd.fingerprint == vocabulary_fingerprint(tok.proto)


@pytest.mark.parametrize("n, spread", [(0, 10), (1, 10), (300, 400), (5000, 6000), (20000, 1 << 40)])
def test_lookup_equals_a_dict(n, spread):
    """The hashed lookup against a dict, with crowded keys (long probe runs) and absent keys."""
    rng = np.random.default_rng(n)
    keys = np.unique(rng.integers(0, spread, n)) if n else np.zeros(0, np.int64)
    prob = rng.random(len(keys)).astype(np.float32)
    table = LexicalTable(keys=keys, prob=prob, vocab_src=spread, vocab_tgt=1, null=False, floor=0.0, iters=0)
    q = np.concatenate([keys, rng.integers(0, spread, 3 * n + 5)])
    ref = dict(zip(keys.tolist(), prob.astype(np.float64).tolist()))
    got = table.lookup(q, np.zeros_like(q))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [ref.get(k, 0.0) for k in q.tolist()])


@pytest.fixture
def table():
    return train(toy_ids(300, seed=1), 300, 300, fingerprint="abc123")


def test_save_load_round_trip(tmp_path, table):
    path = str(tmp_path / "lex.npz")
    save_table(table, path)
    back = load_table(path, fingerprint="abc123")
    assert back.keys.tobytes() == table.keys.tobytes() and back.prob.tobytes() == table.prob.tobytes()
    assert (back.vocab_src, back.vocab_tgt, back.null, back.floor, back.iters, back.fingerprint) == \
        (300, 300, True, table.floor, table.iters, "abc123")
    pairs = toy_ids(20, seed=9)
    src, tgt = flat([e for e, _ in pairs]), flat([f for _, f in pairs])
    np.testing.assert_array_equal(score(back, src, tgt), score(table, src, tgt))
    assert sorted(os.listdir(tmp_path)) == ["lex.npz"]  # nothing left beside it


def rewrite(path: str, **change) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta"].tobytes())
    for k, v in change.items():
        if k in arrays:
            arrays[k] = v
        else:
            meta[k] = v
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_load_refuses_another_version_or_vocabulary(tmp_path, table):
    path = str(tmp_path / "lex.npz")
    save_table(table, path)
    with pytest.raises(ModelFormatError, match="made for the vocabulary 'abc123', not 'ffff'"):
        load_table(path, fingerprint="ffff")
    rewrite(path, format_version=3)
    with pytest.raises(ModelFormatError, match="format_version 3; this bitextmine reads format_version 1, 2"):
        load_table(path)
    for version in (True, 2.0):  # equal to 1 and 2 in Python, not versions
        rewrite(path, format_version=version)
        with pytest.raises(ModelFormatError, match=f"format_version {version!r}; this bitextmine reads"):
            load_table(path)


@pytest.mark.parametrize("field, value, says", [("null", "false", "null 'false'; expected true or false"),
                                                ("null", None, "null None"), ("vocab_src", None, "vocab_src None"),
                                                ("vocab_tgt", 0, "vocab_tgt 0; expected a number of at least 1"),
                                                ("iters", 5.5, "iters 5.5"), ("floor", True, "floor True")])
def test_load_refuses_a_damaged_meta_field_with_one_line(tmp_path, table, field, value, says):
    path = str(tmp_path / "lex.npz")
    save_table(table, path)
    rewrite(path, **{field: value})
    with pytest.raises(ModelFormatError, match=f"lexical table meta field {says}"):
        load_table(path)


def test_no_iteration_and_link_floors_outside_0_1_are_refused(table):
    from bitextmine.lexicon.ibm1 import score_and_links, train_ibm1

    src, tgt = flat([e for e, _ in toy_ids(20, seed=9)]), flat([f for _, f in toy_ids(20, seed=9)])
    with pytest.raises(ConfigError, match="iters 0"):
        train_ibm1(*src, *tgt, 300, 300, iters=0)  # t would be its uniform start, not a distribution
    for bad in (0.0, 2.0):
        with pytest.raises(ConfigError, match=f"link_min_prob {bad}; expected 0 < link_min_prob <= 1"):
            score_and_links(table, src, tgt, (0.05,), link_min_prob=bad)


def test_compact_tables_round_trip_to_three_digits_and_version_1_refuses_compact_arrays(tmp_path, table):
    from bitextmine.lexicon import prune

    path = str(tmp_path / "lex.npz")
    small = prune(table, 0.01)
    assert len(small) < len(table) and small.prob.min() >= 0.01
    save_table(small, path, compact=True)
    back = load_table(path)
    assert back.keys.dtype == np.int64 and back.prob.dtype == np.float32
    assert back.keys.tolist() == small.keys.tolist()
    assert np.allclose(back.prob, small.prob, rtol=1e-3)
    rewrite(path, format_version=1)
    with pytest.raises(ModelFormatError, match="keys of dtype uint32; expected int64"):
        load_table(path)



def test_compact_tables_keep_probabilities_below_the_float16_range(tmp_path, table):
    """A table kept below a floor of 6.1e-5 (float16's smallest normal) is saved in float32, not raised to it."""
    from dataclasses import replace

    path = str(tmp_path / "lex.npz")
    tiny = replace(table, prob=np.where(np.arange(len(table)) % 3 == 0, np.float32(1e-6), table.prob))
    save_table(tiny, path, compact=True)
    back = load_table(path)
    assert back.keys.tolist() == tiny.keys.tolist() and back.prob.min() == np.float32(1e-6)
    np.testing.assert_array_equal(back.prob, tiny.prob)

@pytest.mark.parametrize("change, message", [
    ({"keys": np.array([3, 2], np.int64), "prob": np.array([0.5, 0.5], np.float32)}, "damaged"),
    ({"prob": np.zeros(1, np.float32)}, "damaged"),
    ({"kind": "eflomal"}, "not an IBM model 1 lexical table"),
])
def test_load_refuses_damaged_tables(tmp_path, table, change, message):
    path = str(tmp_path / "lex.npz")
    save_table(table, path)
    rewrite(path, **change)
    with pytest.raises(ModelFormatError, match=message):
        load_table(path)


def test_load_refuses_other_files(tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(ModelFormatError, match="not a lexical table"):
        load_table(str(path))
    with pytest.raises(ModelFormatError, match="cannot read the lexical table"):
        load_table(str(tmp_path / "missing.npz"))
    buf = io.BytesIO()
    np.savez(buf, keys=np.zeros(0, np.int64))
    path.write_bytes(buf.getvalue())
    with pytest.raises(ModelFormatError, match="without meta, prob"):
        load_table(str(path))


def test_ids_outside_the_vocabulary(table):
    with pytest.raises(ConfigError, match="source token id 9 outside the vocabulary of 5"):
        train_ibm1(*flat([[9]]), *flat([[1]]), 5, 5)
    with pytest.raises(ModelFormatError, match="target token id 300 outside the vocabulary of 300"):
        score(table, flat([[1]]), flat([[300]]))
    with pytest.raises(ConfigError, match="2 source sentences and 1 target sentences"):
        score(table, flat([[1], [2]]), flat([[3]]))
