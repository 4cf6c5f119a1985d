"""Each metric against a hand-computed case; STS readers; BUCC threshold selection on a planted corpus."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.cli import main
from bitextmine.errors import ConfigError, CorpusError
from bitextmine.evaluation.metrics import (best_threshold, bucc_candidates, evaluate_threshold, pearson, spearman, sts_eval, tatoeba_eval, year_averages)
from bitextmine.evaluation.readers import read_sts, read_sts_crosslingual

from conftest import shared_path, toy_corpus, write_lines


def test_pearson_and_spearman_by_hand():
    # x = 1,2,3,4 ; y = 1,3,2,5: means 2.5, 2.75; cov sum = 5.5; var sums 5 and 8.75 -> r = 5.5 / sqrt(43.75)
    assert pearson([1, 2, 3, 4], [1, 3, 2, 5]) == pytest.approx(5.5 / np.sqrt(43.75))
    # ranks of y: 1,3,2,4 -> rho = 1 - 6*2/(4*15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 5]) == pytest.approx(0.8)
    # ties get their mean rank: y ranks 1, 2.5, 2.5, 4
    ry = np.array([1, 2.5, 2.5, 4])
    assert spearman([1, 2, 3, 4], [0, 7, 7, 9]) == pytest.approx(pearson([1, 2, 3, 4], ry))
    assert pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_tatoeba_error_rates_by_hand():
    x = np.eye(3, dtype=np.float32)
    # y0 -> nearest x0; y1 nearest x2 (error); y2 nearest x2
    y = np.array([[1, 0, 0], [0, 0.6, 0.8], [0, 0, 1]], np.float32)
    r = tatoeba_eval(x, y, "t")
    # x->y: x0->y0 ok, x1->y1 ok (0.6 vs 0), x2->y1 (0.8) vs y2 (1.0) ok -> 0 errors
    # y->x: y0->x0 ok, y1->x2 error, y2->x2 ok -> 1 of 3
    assert r.error_src_tgt == pytest.approx(0.0) and r.error_tgt_src == pytest.approx(100 / 3)
    assert r.accuracy == pytest.approx(100 - 50 / 3)


def test_sts_cosines_and_year_average_by_hand(tmp_path):
    d = tmp_path / "STS14-en-test"
    d.mkdir()
    write_lines(d / "STS.input.a.txt", ["s1\tt1", "s2\tt2", "s3\tt3", "s4\tt4"])
    write_lines(d / "STS.gs.a.txt", ["1", "", "2", "3"])  # the second pair is unscored
    data = read_sts(str(d / "STS.input.a.txt"))
    assert data.s1 == ["s1", "s3", "s4"] and data.dropped == 1 and data.year == "STS14" and data.name == "a"
    x1 = np.array([[1, 0], [1, 0], [1, 0]], np.float32)
    x2 = np.array([[0, 1], [0.6, 0.8], [1, 0]], np.float32)  # cosines 0, 0.6, 1
    r = sts_eval(x1, x2, data)
    assert r.pearson == pytest.approx(100 * pearson([0, 0.6, 1], [1, 2, 3]))
    assert r.spearman == pytest.approx(100.0)
    r2 = type(r)("b", "STS14", 3, 50.0, 40.0)
    assert year_averages([r, r2])["STS14"] == pytest.approx(((r.pearson + 50) / 2, (100 + 40) / 2))


def test_sts_formats(tmp_path):
    tsv = write_lines(tmp_path / "sts-test.csv", ['main-news\tfile\t2012\t0001\t4.5\tA "quoted\tB', 'g\tf\t2012\t2\t1.0\tC\tD\textra'])
    d = read_sts(tsv)
    assert d.s1 == ['A "quoted', "C"] and d.s2 == ["B", "D"] and list(d.gold) == [4.5, 1.0]
    comp = write_lines(tmp_path / "sts-mt.csv", ["SMTeuroparl\t2012test\t0000\t4.500\tx y\tz"])
    assert read_sts(comp).s2 == ["z"]
    en = write_lines(tmp_path / "en.csv", ['"A, b",c,2.5', "d,e,1"])
    de = write_lines(tmp_path / "de.csv", ['"X, y",Z,2.5', "U,V,1"])
    x = read_sts_crosslingual(en, de)
    assert x.s1 == ["A, b", "d"] and x.s2 == ["Z", "V"]
    bad = write_lines(tmp_path / "bad.csv", ["a,b,high"])
    with pytest.raises(CorpusError, match=r"bad.csv line 1: score 'high' is not a number"):
        read_sts(bad)
    de2 = write_lines(tmp_path / "de2.csv", ['"X, y",Z,2.5', "U,V,4"])
    with pytest.raises(CorpusError, match="pair 2: gold 4.0 differs"):
        read_sts_crosslingual(en, de2)


def test_best_threshold_by_hand():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    correct = np.array([True, True, False, True, False])
    # keep top1: p1 r1/4; top2: p1 r.5 f.667; top3: .667 .5 .571; top4: .75 .75 .75; top5: .6 .75 .667
    t = best_threshold(scores, correct, n_gold=4)
    assert t == pytest.approx(0.55)
    r = evaluate_threshold(scores, correct, 4, t)
    assert (r.predicted, r.correct) == (4, 3) and r.f1 == pytest.approx(0.75)
    assert best_threshold(scores, np.zeros(5, bool), 4) == float("inf")
    # ties: a threshold cannot split equal scores
    # (keeping the top 2 would give F1 1, but it cuts between two 0.8s; allowed: top 1 or all 4, both F1 2/3)
    t2 = best_threshold(np.array([0.9, 0.8, 0.8, 0.8]), np.array([True, True, False, False]), 2)
    assert t2 == pytest.approx(0.85)


def planted(seed: int, n_gold: int = 40, n_noise: int = 60):
    """BUCC-style toy set: n_gold translated pairs hidden among unrelated sentences on both sides."""
    src, tgt = toy_corpus(n_gold + 2 * n_noise, seed=seed)
    rng = np.random.default_rng(seed)
    s_rows = list(range(n_gold)) + list(range(n_gold, n_gold + n_noise))
    t_rows = list(range(n_gold)) + list(range(n_gold + n_noise, n_gold + 2 * n_noise))
    rng.shuffle(s_rows)
    rng.shuffle(t_rows)
    s_lines = [f"s{seed}-{i:05d}\t{src[i]}" for i in s_rows]
    t_lines = [f"t{seed}-{i:05d}\t{tgt[i]}" for i in t_rows]
    gold = [f"s{seed}-{i:05d}\tt{seed}-{i:05d}" for i in range(n_gold)]
    return s_lines, t_lines, gold


def write_planted(tmp_path, seed):
    s, t, g = planted(seed)
    return (write_lines(tmp_path / f"b{seed}.src", s), write_lines(tmp_path / f"b{seed}.tgt", t),
            write_lines(tmp_path / f"b{seed}.gold", g))


def test_bucc_on_planted_embeddings():
    rng = np.random.default_rng(0)
    d, n_gold = 16, 30
    base = rng.normal(size=(n_gold, d))
    x = np.concatenate([base + 0.05 * rng.normal(size=base.shape), rng.normal(size=(50, d))])
    y = np.concatenate([base + 0.05 * rng.normal(size=base.shape), rng.normal(size=(50, d))])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    sid = [f"s{i}" for i in range(len(x))]
    tid = [f"t{i}" for i in range(len(y))]
    gold = {(f"s{i}", f"t{i}") for i in range(n_gold)}
    c = bucc_candidates(x, y, sid, tid, gold)
    t = best_threshold(c.scores, c.correct, c.n_gold)
    r = evaluate_threshold(c.scores, c.correct, c.n_gold, t)
    assert r.f1 == 1.0 and r.predicted == n_gold


def test_eval_bucc_cli_tuned_and_oracle(tmp_path, toy_model_dir):
    test = write_planted(tmp_path, 1)
    train = write_planted(tmp_path, 2)
    png = str(tmp_path / "bucc.png")
    r = CliRunner().invoke(main, ["eval", "bucc", *test, "--tune-on", *train, "--model", toy_model_dir, "--plot", png,
                                  "--device", "cpu", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["f1"] > 0.8 and res["gold"] == 40 and not res["oracle"] and res["tuned_on"] == "b2.src"
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    r = CliRunner().invoke(main, ["eval", "bucc", *test, "--oracle", "--model", toy_model_dir, "--device", "cpu"])
    assert r.exit_code == 0 and "ORACLE" in r.output
    oracle = json.loads(CliRunner().invoke(main, ["eval", "bucc", *test, "--oracle", "--model", toy_model_dir,
                                                  "--json"]).output)
    assert oracle["oracle"] and oracle["f1"] >= res["f1"]  # tuned on the evaluated set: an upper bound
    copy = [write_lines(tmp_path / f"copy{i}", open(f).read().splitlines()) for i, f in enumerate(test)]
    same = json.loads(CliRunner().invoke(main, ["eval", "bucc", *test, "--tune-on", *copy, "--model", toy_model_dir,
                                                "--json"]).output)
    assert same["oracle"] and same["f1"] == oracle["f1"]  # "tuned" on a copy of the evaluated set: an oracle
    r = CliRunner().invoke(main, ["eval", "bucc", *test, "--model", toy_model_dir])
    assert r.exit_code == 1 and "exactly one of --tune-on" in r.output
    ivf = ["eval", "bucc", *test, "--oracle", "--model", toy_model_dir, "--index", "ivf", "--nlist", "4",
           "--recall-check", "20"]
    checked = json.loads(CliRunner().invoke(main, ivf + ["--json"]).output)
    assert len(checked["search_recall"]) == 2 and all(0 < v <= 1 for v in checked["search_recall"])
    assert "search recall@k (src->tgt / tgt->src)" in CliRunner().invoke(main, ivf).output
    assert "search_recall" not in oracle  # exact search: nothing to check
    bad = write_lines(tmp_path / "bad.gold", ["s1-00000\tnope"])
    r = CliRunner().invoke(main, ["eval", "bucc", test[0], test[1], bad, "--oracle", "--model", toy_model_dir])
    assert r.exit_code == 1 and "names an id missing from" in r.output


def test_eval_tatoeba_and_sts_cli(tmp_path, toy_model_dir):
    src, tgt = toy_corpus(200, seed=21)
    d = tmp_path / "v1"
    d.mkdir()
    write_lines(d / "tatoeba.aaa-eng.aaa", src)
    write_lines(d / "tatoeba.aaa-eng.eng", tgt)
    write_lines(d / "tatoeba.bbb-eng.bbb", src[:50])
    write_lines(d / "tatoeba.bbb-eng.eng", tgt[:50])
    r = CliRunner().invoke(main, ["eval", "tatoeba", "--all", str(d), "--model", toy_model_dir, "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert [x["name"] for x in res["languages"]] == ["aaa", "bbb"] and res["mean_accuracy"] > 80
    r = CliRunner().invoke(main, ["eval", "tatoeba", str(d / "tatoeba.aaa-eng.aaa"), str(d / "tatoeba.aaa-eng.eng"),
                                  "--model", toy_model_dir])
    assert r.exit_code == 0 and "err src->tgt %" in r.output
    # STS: paraphrases (same words) score 5, unrelated pairs 0
    rows = [f"{src[i]},{src[i]},5" if i % 2 else f"{src[i]},{src[i + 1]},0" for i in range(40)]
    csv = write_lines(tmp_path / "sts.csv", rows)
    r = CliRunner().invoke(main, ["eval", "sts", csv, "--model", toy_model_dir, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["datasets"][0]["pearson"] > 90


def test_eval_with_precomputed_embeddings_matches(tmp_path, toy_model_dir):
    src, tgt = toy_corpus(100, seed=22)
    a, b = write_lines(tmp_path / "a", src), write_lines(tmp_path / "b", tgt)
    runner = CliRunner()
    for f in (a, b):
        assert runner.invoke(main, ["encode", f, "-o", f + ".npy", "--model", toy_model_dir, "-q"]).exit_code == 0
    direct = json.loads(runner.invoke(main, ["eval", "tatoeba", a, b, "--model", toy_model_dir, "--json"]).output)
    pre = runner.invoke(main, ["eval", "tatoeba", a, b, "--model", toy_model_dir, "--src-emb", a + ".npy",
                               "--tgt-emb", b + ".npy", "--json"])
    assert pre.exit_code == 0, pre.output
    assert json.loads(pre.output) == direct
    wrong = runner.invoke(main, ["eval", "tatoeba", a, b, "--model", toy_model_dir, "--src-emb", a + ".npy",
                                 "--tgt-emb", b + ".npy", "--sif"])
    assert wrong.exit_code == 1 and "re-encode with the same --model (and --sif" in wrong.output
    swapped = runner.invoke(main, ["eval", "tatoeba", a, b, "--model", toy_model_dir, "--src-emb", b + ".npy",
                                   "--tgt-emb", a + ".npy"])  # the same count, from the same model: the text differs
    assert swapped.exit_code == 1
    assert swapped.output == (f"Error: {b}.npy: encodes another text than {a} (input checksum differs); expected the "
                              "embeddings of that text's lines\n")


def test_eval_sts_checks_the_column_a_sidecar_encodes(tmp_path, toy_model_dir):
    """STS columns have no file of their own: a sidecar's text is checked against the column's lines, one a
    line; the other column's embeddings (the same count) are refused."""
    src, _ = toy_corpus(40, seed=23)
    csv = write_lines(tmp_path / "sts.csv", [f"{src[i]},{src[(i + 1) % 40]},{i % 6}" for i in range(40)])
    s1, s2 = write_lines(tmp_path / "s1", src), write_lines(tmp_path / "s2", src[1:] + src[:1])
    runner = CliRunner()
    for f in (s1, s2):
        assert runner.invoke(main, ["encode", f, "-o", f + ".npy", "--model", toy_model_dir, "-q"]).exit_code == 0
    direct = json.loads(runner.invoke(main, ["eval", "sts", csv, "--model", toy_model_dir, "--json"]).output)
    pre = runner.invoke(main, ["eval", "sts", csv, "--model", toy_model_dir, "--emb1", s1 + ".npy", "--emb2",
                               s2 + ".npy", "--json"])
    assert pre.exit_code == 0, pre.output
    assert json.loads(pre.output) == direct
    swapped = runner.invoke(main, ["eval", "sts", csv, "--model", toy_model_dir, "--emb1", s2 + ".npy", "--emb2",
                                   s1 + ".npy"])
    assert swapped.exit_code == 1 and f"{s2}.npy: encodes another text than {csv} (s1)" in swapped.output


def test_calibration_neighbours_equal_the_full_matrix():
    from bitextmine.evaluation.calibration import _neighbours

    rng = np.random.default_rng(4)
    x = rng.integers(-1, 2, (30, 5)).astype(np.float32)  # many exact ties
    y = rng.integers(-1, 2, (30, 5)).astype(np.float32)
    shuffled = (np.arange(30) + rng.integers(1, 30, 30)) % 30
    near, (good, shuf, near_cos), mx, my = _neighbours(x, y, shuffled, 4)
    sim = x @ y.T
    masked = sim.copy()
    masked[np.arange(30), np.arange(30)] = -np.inf
    np.testing.assert_array_equal(near, masked.argmax(1))  # the first maximum
    np.testing.assert_array_equal(near_cos, masked.max(1))
    np.testing.assert_array_equal(good, np.diag(sim))
    np.testing.assert_array_equal(shuf, sim[np.arange(30), shuffled])
    np.testing.assert_array_equal(mx, np.sort(sim, axis=1)[:, -4:].mean(1))
    np.testing.assert_array_equal(my, np.sort(sim, axis=0)[-4:, :].mean(0))


def test_calibration_leaves_out_blank_pairs_and_says_which(toy_model):
    """A gold pair with a blank side is no translation: calibrating with such pairs added gives the report of
    the gold set without them, and names them (1-based) in the table and the JSON."""
    from bitextmine.evaluation.calibration import calibrate

    src, tgt = toy_corpus(60, seed=21)
    clean = calibrate(src, tgt, toy_model, score="margin")
    with_blank = calibrate(src[:10] + ["", "ein Haus"] + src[10:] + ["  "],
                           tgt[:10] + ["a house", "\t"] + tgt[10:] + ["a tree"], toy_model, score="margin")
    assert with_blank.blank == [11, 12, 63] and with_blank.to_json()["left_out_blank"] == [11, 12, 63]
    assert "left out: 3 gold pairs with a blank side (pairs 11, 12, 63)" in with_blank.to_table()
    assert with_blank.suggested == clean.suggested and with_blank.rows == clean.rows
    assert {k: len(v) for k, v in with_blank.scores.items()} == {k: len(v) for k, v in clean.scores.items()}


def test_calibration_takes_no_copy_of_a_good_target_for_a_bad_pair(toy_model):
    """When the gold set repeats a target, a shuffled pair may give a source its own translation: it is not
    counted as a bad pair (as near-miss pairs already were not)."""
    from bitextmine.evaluation.calibration import calibrate

    src, tgt = toy_corpus(40, seed=22)
    tgt = [tgt[0] if i % 2 else t for i, t in enumerate(tgt)]  # every odd pair has the first pair's target
    src = [src[0] if i % 2 else s for i, s in enumerate(src)]
    report = calibrate(src, tgt, toy_model, score="cosine")
    good = set(np.round(report.scores["good"], 6))
    assert len(report.scores["shuffled"]) < 40 and not (set(np.round(report.scores["shuffled"], 6)) & good)


def test_calibration_counts_no_alternative_translation_as_a_bad_pair(toy_model):
    """A source repeated with another translation ("Help!" / "Hilfe!", "Help!" / "Zu Hülf!"): pairing it with the
    other gold target is a gold pair too, not a near miss or a shuffled bad pair."""
    from bitextmine.evaluation.calibration import calibrate

    src, tgt = toy_corpus(40, seed=23)
    src = [src[i - 1] if i % 2 else s for i, s in enumerate(src)]  # pair 2k+1 has pair 2k's source, its own target
    report = calibrate(src, tgt, toy_model, score="cosine")
    good = {round(float(v), 6) for v in report.scores["good"]}  # a gold pair taken as bad would repeat its cosine
    for name in ("near-miss", "shuffled"):
        assert report.scores[name].size and not ({round(float(v), 6) for v in report.scores[name]} & good)

def test_bucc_counts_a_gold_text_pair_under_either_id_of_a_repeated_sentence():
    """Two ids of one sentence have one embedding and the search keeps the lower id; the gold file may name the
    other. The mined text pair is the gold one: correct, as LASER's bucc.py counts it."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 8))
    x[3] = x[0]  # s3 repeats s0
    y = x[[0, 1, 2]] + 0.01 * rng.normal(size=(3, 8))
    x, y = (a / np.linalg.norm(a, axis=1, keepdims=True) for a in (x, y))
    sid, tid = [f"s{i}" for i in range(6)], ["t0", "t1", "t2"]
    stext = ["same", "b", "c", "same", "e", "f"]
    gold = {("s3", "t0"), ("s1", "t1"), ("s2", "t2")}
    by_id = bucc_candidates(x, y, sid, tid, gold)
    by_text = bucc_candidates(x, y, sid, tid, gold, texts=(stext, ["T0", "T1", "T2"]))
    kept = [(a, b) for a, b in zip(by_text.src_ids, by_text.tgt_ids) if b == "t0"]
    assert kept == [("s0", "t0")]
    assert by_id.correct.sum() == 2 and by_text.correct.sum() == 3


def test_eval_tatoeba_refuses_lang_without_a_folder(tmp_path):
    from bitextmine.evaluation.runners import run_tatoeba

    a, b = write_lines(tmp_path / "a", ["x"]), write_lines(tmp_path / "b", ["y"])
    with pytest.raises(ConfigError, match="--lang fra: picks languages of an --all folder"):
        run_tatoeba(a, b, languages=["fra"])

def test_retrieval_accuracy_ties_count_only_for_the_first_maximum():
    from bitextmine.evaluation.metrics import retrieval_accuracy

    x = np.array([[1, 0], [1, 0], [0, 1]], np.float32)
    y = np.array([[1, 0], [1, 0], [0, 1]], np.float32)
    # rows 0 and 1 tie for both x0 and x1: the first maximum (0) is right for row 0 only, both ways
    assert retrieval_accuracy(x, y, block=2) == (2 / 3, 2 / 3)


def _other_encoder_files(tmp_path, name: str, texts, model):
    """The texts' embeddings as another encoder would hand them over: a LASER raw file and a sidecar-less .npy."""
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding.pipeline import encode

    x = encode(list(texts), model, config=EncodeConfig(device="cpu"))
    raw, npy = str(tmp_path / f"{name}.raw"), str(tmp_path / f"{name}.npy")
    x.tofile(raw)
    np.save(npy, x)
    return {"raw": raw, "npy": npy}


def test_another_encoders_rows_are_normalised_as_mine_takes_them(tmp_path, toy_model, toy_model_dir):
    """Another encoder's rows need not be unit length (LASER's are not): each row scaled by 0.2 to 5 gives the
    Tatoeba and STS results of the unit rows, as mine gives the same pairs for both."""
    from bitextmine.config import EncodeConfig
    from bitextmine.encoding.pipeline import encode

    src, tgt = toy_corpus(60, seed=24)
    a, b = write_lines(tmp_path / "a", src), write_lines(tmp_path / "b", tgt)
    rng = np.random.default_rng(5)
    files = {}
    for name, texts in (("a", src), ("b", tgt)):
        x = encode(list(texts), toy_model, config=EncodeConfig(device="cpu"))
        for kind, rows in (("unit", x), ("scaled", x * rng.uniform(0.2, 5, (len(x), 1)).astype(np.float32))):
            files[name, kind] = str(tmp_path / f"{name}.{kind}.npy")
            np.save(files[name, kind], rows)
    runner = CliRunner()
    sts = write_lines(tmp_path / "sts.csv", [f"{src[i]},{tgt[i]},{i % 6}" for i in range(60)])
    out = {}
    for kind in ("unit", "scaled"):
        t = runner.invoke(main, ["eval", "tatoeba", a, b, "--src-emb", files["a", kind], "--tgt-emb", files["b", kind],
                                 "--model", str(tmp_path / "none"), "--json"])
        e = runner.invoke(main, ["eval", "sts", sts, "--emb1", files["a", kind], "--emb2", files["b", kind],
                                 "--model", toy_model_dir, "--json"])
        assert t.exit_code == 0 and e.exit_code == 0, t.output + e.output
        out[kind] = json.loads(t.output), json.loads(e.output)
    assert out["scaled"][0] == out["unit"][0]
    got, want = out["scaled"][1]["datasets"][0], out["unit"][1]["datasets"][0]
    assert got["pearson"] == pytest.approx(want["pearson"], abs=1e-4)
    assert got["spearman"] == pytest.approx(want["spearman"], abs=1e-4)


def test_eval_tatoeba_and_bucc_from_any_encoder_load_no_model(tmp_path, toy_model_dir, toy_model):
    from bitextmine.evaluation.readers import read_bucc_sentences

    runner = CliRunner()
    no_model = str(tmp_path / "no-model")  # loading it would fail: the runs below load no model
    dim = str(toy_model.dim)
    src, tgt = toy_corpus(100, seed=23)
    a, b = write_lines(tmp_path / "a", src), write_lines(tmp_path / "b", tgt)
    ea, eb = _other_encoder_files(tmp_path, "a", src, toy_model), _other_encoder_files(tmp_path, "b", tgt, toy_model)
    direct = runner.invoke(main, ["eval", "tatoeba", a, b, "--model", toy_model_dir, "--device", "cpu", "--json"])
    assert direct.exit_code == 0, direct.output
    test = write_planted(tmp_path, 3)
    es = _other_encoder_files(tmp_path, "s", read_bucc_sentences(test[0])[1], toy_model)
    et = _other_encoder_files(tmp_path, "t", read_bucc_sentences(test[1])[1], toy_model)
    bucc = runner.invoke(main, ["eval", "bucc", *test, "--oracle", "--model", toy_model_dir, "--device", "cpu", "--json"])
    assert bucc.exit_code == 0, bucc.output
    for fmt in ("raw", "npy"):
        r = runner.invoke(main, ["eval", "tatoeba", a, b, "--src-emb", ea[fmt], "--tgt-emb", eb[fmt], "--emb-format", fmt,
                                 "--dim", dim, "--model", no_model, "--device", "cpu", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output) == json.loads(direct.output)
        r = runner.invoke(main, ["eval", "bucc", *test, "--oracle", "--src-emb", es[fmt], "--tgt-emb", et[fmt],
                                 "--emb-format", fmt, "--dim", dim, "--model", no_model, "--device", "cpu", "--json"])
        assert r.exit_code == 0, r.output
        got, want = json.loads(r.output), json.loads(bucc.output)  # the rows normalised again: float rounding
        assert got.pop("threshold") == pytest.approx(want.pop("threshold"), abs=1e-6) and got == want
    # a raw file of another text: one line naming both files and both counts
    short = str(tmp_path / "short.raw")
    np.fromfile(ea["raw"], np.float32)[: 99 * toy_model.dim].tofile(short)
    r = runner.invoke(main, ["eval", "tatoeba", a, b, "--src-emb", short, "--tgt-emb", eb["raw"], "--emb-format", "raw",
                             "--dim", dim, "--model", no_model])
    assert r.exit_code == 1 and r.output == f"Error: {short}: 99 rows, but {a} has 100 lines; expected one row per line\n"
    r = runner.invoke(main, ["eval", "bucc", *test, "--oracle", "--src-emb", es["raw"], "--tgt-emb", et["raw"],
                             "--emb-format", "raw", "--model", no_model])
    assert r.exit_code == 1 and r.output == (f"Error: {es['raw']}: raw embeddings need --dim (the values per row; "
                                             "the file has no header)\n")


@pytest.mark.slow
def test_eval_tatoeba_from_raw_embeddings_on_real_data(tmp_path):
    """Tatoeba deu-eng with the bundled model's embeddings handed over as LASER raw files: float32 gives the
    figures of the direct run, float16 nearly."""
    from bitextmine.corpus import read_lines
    from bitextmine.loading import load_model

    de = shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.deu")
    en = shared_path("dev", "tatoeba", "v1", "tatoeba.deu-eng.eng")
    model = load_model()
    runner = CliRunner()
    direct = json.loads(runner.invoke(main, ["eval", "tatoeba", de, en, "--device", "cpu", "--json"]).output)
    e_de = _other_encoder_files(tmp_path, "de", read_lines(de), model)["raw"]
    e_en = _other_encoder_files(tmp_path, "en", read_lines(en), model)["raw"]
    args = ["eval", "tatoeba", de, en, "--src-emb", e_de, "--tgt-emb", e_en, "--emb-format", "raw", "--dim",
            str(model.dim), "--model", str(tmp_path / "no-model"), "--device", "cpu", "--json"]
    assert json.loads(runner.invoke(main, args).output) == direct
    for p in (e_de, e_en):
        np.fromfile(p, np.float32).astype(np.float16).tofile(p + "16")
    args[5], args[7] = e_de + "16", e_en + "16"
    half = json.loads(runner.invoke(main, args + ["--fp16"]).output)
    assert abs(half["mean_accuracy"] - direct["mean_accuracy"]) < 0.5
