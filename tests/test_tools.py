"""What the dev tools build evaluation data with (bitextmine.evaluation): held-apart pairs, mining tasks of any
size, and sides with planted translations."""

import numpy as np
import pytest

from bitextmine.corpus import CorpusSpec


def _write(path, lines):
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return str(path)


def test_hold_apart_draws_only_from_large_corpora_and_removes_the_pairs(tmp_path):
    from bitextmine.evaluation.devdata import hold_apart

    big = [CorpusSpec(src=_write(tmp_path / "big.en", [f"english {i}" for i in range(200)]),
                      tgt=_write(tmp_path / "big.de", [f"deutsch {i}" for i in range(200)]), group="de")]
    small = [CorpusSpec(src=_write(tmp_path / "small.en", [f"short {i}" for i in range(50)]),
                        tgt=_write(tmp_path / "small.de", [f"kurz {i}" for i in range(50)]), group="de")]
    (tmp_path / "tmp").mkdir()
    done = hold_apart(big + small, 30, 0, str(tmp_path / "held"), str(tmp_path / "tmp"), min_corpus=100)
    out = done.specs
    assert done.held == {"de": 30} and done.dropped == 30
    en = (tmp_path / "held" / "en-de.en").read_text(encoding="utf-8").splitlines()
    de = (tmp_path / "held" / "en-de.de").read_text(encoding="utf-8").splitlines()
    assert len(en) == 30 and all(e.startswith("english") for e in en)
    assert [d.split()[1] for d in de] == [e.split()[1] for e in en]  # still aligned
    kept = out[0].read()[0]
    assert len(kept) == 170 and not set(en) & set(kept)
    assert len(out[1].read()[0]) == 50  # the small corpus is whole
    folder = f"{tmp_path.name} (held-apart pairs removed)"  # the corpus's folder, as the model records it
    assert out[0].describe() == f"{folder}/big.en + {folder}/big.de"


def test_mining_task_gold_lines_and_distractors_without_known_translations():
    from bitextmine.evaluation.holdout_tasks import build_task, key

    gold_fx, gold_en = [f"g{i}" for i in range(40)], [f"G{i}" for i in range(40)]
    pool = [(f"f{i}", f"E{i}") for i in range(400)] + [("f1", "E999")]  # f1 has two English partners
    pool += [("F2!", "e 7"), ("g3", "x"), ("y", "_g4_")]  # f2 / E7 up to case and punctuation; gold texts
    partners = {}
    for f, e in pool:
        partners.setdefault(key(f), set()).add(key(e))
    src, tgt, gold, g = build_task((gold_fx, gold_en, pool, partners), 100, np.random.default_rng(0))
    assert g == 40 and len(gold) == 40  # size // 2 = 50, but only 40 gold pairs exist
    assert len(src) == len(tgt) == 100 and len({key(x) for x in src}) == len({key(x) for x in tgt}) == 100
    for s, t in gold:
        assert src[s - 1][0] == "g" and tgt[t - 1] == "G" + src[s - 1][1:]
    chosen = {key(x) for x in src}
    assert not {e for f in chosen for e in partners.get(f, ())} & {key(x) for x in tgt}


def test_bench_second_stage_sides_plant_translations_and_keep_the_other_lines_apart(tmp_path):
    import lzma

    from bitextmine.evaluation.planted import line_orders, sides, write_pairs

    # one pair a line: the former layout (one permutation, the planted lines first, then each side's own)
    fx, en = line_orders(100, 40, 4, 1, np.random.default_rng(1))
    order = np.random.default_rng(1).permutation(100).tolist()
    assert [c[0] for c in fx] == order[:40] and [c[0] for c in en] == order[:4] + order[40:76]
    # joined pairs: more lines than pairs, every line once, no pair shared by the sides but the planted lines'
    fx, en = line_orders(300, 500, 25, 2, np.random.default_rng(1))
    assert fx[:25] == en[:25] and len(set(fx)) == 500 and len(set(en)) == 500
    a, b, p = ({i for c in side for i in c} for side in (fx[25:], en[25:], fx[:25]))
    assert not a & b and not a & p and not b & p
    # through a pairs file, as a machine without ../shared/data gets them
    pairs = [(f"fx{i}  mot", f"en{i} word") for i in range(300)]
    write_pairs(pairs, str(tmp_path / "p.xz"), 0, 0)
    src, tgt = sides("fr", 500, 0.05, 1, str(tmp_path / "s"), join=2, pairs_file=str(tmp_path / "p.xz"))
    s = lzma.open(src, "rt", encoding="utf-8").read().splitlines()
    t = lzma.open(tgt, "rt", encoding="utf-8").read().splitlines()
    assert len(s) == len(t) == 500 and s[0] == " ".join(f"fx{i} mot" for i in fx[0])
    assert [x.replace("fx", "").replace(" mot", "") for x in s[:25]] == [y.replace("en", "").replace(" word", "")
                                                                         for y in t[:25]]


def test_manuals_half_splits_the_manuals_by_a_hash_of_the_english_key(tmp_path):
    import gzip
    import hashlib

    from bitextmine.evaluation.devdata import manuals_half
    from bitextmine.judge.tasks import key

    folder = tmp_path / "train" / "debian_docs"
    folder.mkdir(parents=True)
    words = ["apt", "boot", "cron", "disk", "edit", "font", "grub", "host", "init", "jobs", "kernel", "link", "mail",
             "mount", "node", "port", "queue", "root", "shell", "task"]  # keys differ (every digit run is one 0)
    en = [f"The manual describes {w} in chapter {c}." for w in words for c in ("one", "two")]
    fx = [f"Das Handbuch beschreibt {w} in Kapitel {c}." for w in words for c in ("eins", "zwei")]
    for name, lines in (("en-de.en.gz", en), ("en-de.de.gz", fx)):
        with gzip.open(folder / name, "wt", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    odd, even = manuals_half(str(tmp_path), "de"), manuals_half(str(tmp_path), "de", odd=False)
    by_hand = [(x, e) for x, e in zip(fx, en) if hashlib.md5(key(e).encode()).digest()[0] % 2 == 1]
    assert odd == by_hand and sorted(odd + even) == sorted(zip(fx, en)) and odd and even


def test_calibrate_bundled_gives_two_dev_sets_and_the_training_corpora_but_the_manuals_as_filler(tmp_path):
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location("calibrate_bundled", os.path.join(
        os.path.dirname(__file__), "..", "tools", "calibrate_bundled.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for corpus in ("debian_docs", "debian_iso_codes", "debian_wesnoth", "turkish_parallel_corpora"):
        (tmp_path / "train" / corpus).mkdir(parents=True)
    for corpus in ("debian_docs", "debian_iso_codes", "debian_wesnoth"):
        (tmp_path / "train" / corpus / "en-tr.en.gz").write_bytes(b"")
    (tmp_path / "train" / "turkish_parallel_corpora" / "bible.en.gz").write_bytes(b"")
    args = tool.arguments("tr", str(tmp_path), "HOLD")
    groups = [args[i:i + 5] for i in range(0, len(args), 5)]
    assert groups[:2] == [["--pair", "tr", "en", "HOLD/en-tr.tr", "HOLD/en-tr.en"],
                          ["--pair", "tr", "en", f"{tmp_path}/dev/tatoeba/v1/tatoeba.tur-eng.tur",
                           f"{tmp_path}/dev/tatoeba/v1/tatoeba.tur-eng.eng"]]
    fillers = [g[3] for g in groups[2:]]
    assert all(g[:3] == ["--filler", "tr", "en"] for g in groups[2:])
    assert [os.path.relpath(f, tmp_path / "train") for f in fillers] == [
        "debian_wesnoth/en-tr.tr.gz", "turkish_parallel_corpora/bible.tr.gz"]
    de = tool.arguments("de", str(tmp_path), "HOLD", manuals="MAN")  # the manuals' half, and news as documents
    assert de[10:] == ["--pair", "de", "en", "MAN/en-de.de", "MAN/en-de.en",
                       "--context", "de", "en", "MAN/en-de.de", "MAN/en-de.en", "MAN/en-de.docs",
                       "--context", "de", "en", *(f"{tmp_path}/train/wmt_newstest/en-de.{x}.gz"
                                                  for x in ("de", "en", "origin"))]


def test_the_manuals_half_with_its_documents_is_the_half_that_reports_less_nothing(tmp_path):
    """manuals_half_documents gives manuals_half's pairs with each line's manual; the two halves split the corpus."""
    import gzip

    from bitextmine.evaluation.devdata import manuals_half, manuals_half_documents

    base = tmp_path / "train" / "debian_docs"
    base.mkdir(parents=True)
    rows = [(f"satz {w}", f"sentence {w}", f"manual{i % 3}") for i, w in enumerate("abcdefghijklmnopqrst")]
    for k, suffix in enumerate(("de", "en", "origin")):
        with gzip.open(base / f"en-de.{suffix}.gz", "wt", encoding="utf-8") as f:
            f.writelines(r[k] + "\n" for r in rows)
    halves = [manuals_half_documents(str(tmp_path), "de", odd) for odd in (True, False)]
    assert [h[0] for h in halves] == [manuals_half(str(tmp_path), "de", odd) for odd in (True, False)]
    assert sorted(p + (n,) for h in halves for p, n in zip(*h)) == sorted(rows)


def test_pivot_pairs_join_two_languages_on_their_shared_english_in_one_half(tmp_path):
    """manuals_pivot pairs the German and French lines whose English is the same, within one half of the English
    keys; an English text with two German translations is left out; write_pivot writes them line-aligned."""
    import gzip
    import importlib.util
    import os

    from bitextmine.evaluation.devdata import manuals_half, manuals_pivot

    base = tmp_path / "train" / "debian_docs"
    base.mkdir(parents=True)
    words = "apt boot cron disk edit font grub host init jobs kernel link mail mount node port".split()
    en = [f"The manual describes {w}." for w in words]
    corpora = {"de": ([f"Das Handbuch beschreibt {w}." for w in words] + ["Zweite Übersetzung."], en + [en[0]]),
               "fr": ([f"Le manuel décrit {w}." for w in words[:1] + words[3:]], en[:1] + en[3:])}  # not 2 and 3
    for lang, (fx, english) in corpora.items():
        for suffix, lines in ((lang, fx), ("en", english)):
            with gzip.open(base / f"en-{lang}.{suffix}.gz", "wt", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
    for odd in (True, False):
        half = {e for _, e in manuals_half(str(tmp_path), "de", odd)}
        by_hand = [(f"Das Handbuch beschreibt {w}.", f"Le manuel décrit {w}.") for w, e in zip(words, en)
                   if e in half and w not in words[:3]]  # apt: two German translations
        assert manuals_pivot(str(tmp_path), "de", "fr", odd) == by_hand
    spec = importlib.util.spec_from_file_location("calibrate_bundled", os.path.join(
        os.path.dirname(__file__), "..", "tools", "calibrate_bundled.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    paths = tool.write_pivot(str(tmp_path / "pivot"), "de", "fr", data=str(tmp_path))
    sides = [open(p, encoding="utf-8").read().splitlines() for p in paths]
    assert list(zip(*sides)) == manuals_pivot(str(tmp_path), "de", "fr", odd=False)


def test_the_reliability_diagram_pools_bins_by_their_candidates_and_draws_a_line_a_share():
    import importlib.util
    import os
    import xml.dom.minidom

    spec = importlib.util.spec_from_file_location("reliability", os.path.join(
        os.path.dirname(__file__), "..", "tools", "reliability.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    found = {"pool 1000 0.01 de": {"bins": [[0, 30, 0.02, 0.0], [9, 10, 0.95, 0.9]]},
             "pool 10000 0.01 fr": {"bins": [[0, 10, 0.06, 0.4]]},
             "news 1500 0.1 de": {"bins": [[5, 4, 0.55, 0.5]]}}
    pooled = tool.pooled_bins(found)
    assert pooled[("pool", 0.01)] == [pytest.approx((0.03, 0.1, 40)), pytest.approx((0.95, 0.9, 10))]
    assert pooled[("news", 0.1)] == [pytest.approx((0.55, 0.5, 4))]
    doc = xml.dom.minidom.parseString(tool.svg(pooled))
    assert len(doc.getElementsByTagName("polyline")) == 2 and doc.documentElement.tagName == "svg"
