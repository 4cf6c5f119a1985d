"""mine --assist-pick (bitextmine/assist/pick.py): the pick against a slow reading of its definition, and the run
with assist embeddings files: the fast model's own vectors change no pair, an assist that knows the answers loses
none, and the option without an assist is refused."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from bitextmine.assist import pick
from bitextmine.cli import main
from bitextmine.config import MineConfig
from bitextmine.encoding import encode
from bitextmine.errors import ConfigError
from bitextmine.loading import load_model
from bitextmine.pipeline import mine_files

EXAMPLES = "examples"
SMALL = MineConfig(second_stage_min_lines=10)  # the example's 38 lines judged by the second stage


def slow_pick(D, I, A, mean_o_of):
    """Row by row: the joint cosines of the filled slots, their mean, each slot's ratio margin, the first best."""
    slots, margins = [], []
    for d, i, a in zip(D.tolist(), I.tolist(), A.tolist()):
        joint = [(x + y) / 2 for x, y, o in zip(d, a, i) if o >= 0]
        mean_q = sum(joint) / len(joint) if joint else 0.0
        best, at = -np.inf, 0
        for slot, (x, y, o) in enumerate(zip(d, a, i)):
            if o >= 0 and ((x + y) / 2) / ((mean_q + mean_o_of[o]) / 2) > best:
                best, at = ((x + y) / 2) / ((mean_q + mean_o_of[o]) / 2), slot
        slots.append(at)
        margins.append(best)
    return slots, margins


def test_pick_is_its_definition():
    rng = np.random.default_rng(3)
    D = rng.uniform(0.1, 0.9, (30, 4)).astype(np.float32)
    A = rng.uniform(0.1, 0.9, (30, 4)).astype(np.float32)
    I = rng.integers(0, 12, (30, 4))
    I[5, 2:] = -1  # slots the search left empty
    I[7] = -1  # a row with no neighbour
    mean_o = rng.uniform(0.2, 0.6, 12).astype(np.float32)
    J = pick.joint_cosines(D, I, A)
    slot, margin = pick.pick(J, I, pick.joint_means(J), mean_o)
    want_slot, want_margin = slow_pick(D, I, A, mean_o.tolist())
    assert slot.tolist() == want_slot
    finite = np.isfinite(want_margin)
    assert not finite[7] and not np.isfinite(margin[7])
    np.testing.assert_allclose(margin[finite], np.array(want_margin)[finite], rtol=1e-5)
    assert pick.joint_means(J)[7] == 0


def test_candidates_are_each_rows_best_joint_margin_with_both_sides_means():
    rng = np.random.default_rng(5)
    n, m, k, d = 9, 7, 3, 6
    fx, fy = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    ax, ay = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    fast = fx @ fy.T
    assist = ax @ ay.T
    nn = {}
    for side, S in (("src", fast), ("tgt", fast.T)):
        I = np.argsort(-S, 1)[:, :k]
        D = np.take_along_axis(S, I, 1).astype(np.float32)
        nn[side] = (np.arange(len(S)), D, I, D.mean(1))
    nn["tgt"][2][4, 2] = -1  # an empty slot
    f, b = pick.candidates(nn, {"src": n, "tgt": m}, lambda s, t: assist[s, t])

    def joint_mean(side, r):
        _, D, I, _ = nn[side]
        vals = [(D[r, j] + (assist[r, I[r, j]] if side == "src" else assist[I[r, j], r])) / 2
                for j in range(k) if I[r, j] >= 0]
        return sum(vals) / len(vals)

    for got, side, other in ((f, "src", "tgt"), (b, "tgt", "src")):
        for r in range(len(nn[side][0])):
            _, D, I, means = nn[side]
            scores = {}
            for j in range(k):
                o = I[r, j]
                if o >= 0:
                    c = (D[r, j] + (assist[r, o] if side == "src" else assist[o, r])) / 2
                    scores.setdefault(o, c / ((joint_mean(side, r) + joint_mean(other, o)) / 2))
            best = max(scores, key=scores.get)
            assert got["other"][r] == best and got["row"][r] == r
            assert got["score"][r] == pytest.approx(scores[best], rel=1e-5)
            assert got["cos"][r] == pytest.approx(fast[r, best] if side == "src" else fast[best, r], rel=1e-5)
            assert got["mean_q"][r] == means[r] and got["mean_o"][r] == nn[other][3][best]


def _mine(config, assist_emb):
    out = io.StringIO()
    stats = mine_files(f"{EXAMPLES}/de.txt", f"{EXAMPLES}/en.txt", out, config=config, ids=True, src_lang="de",
                       tgt_lang="en", assist_emb=assist_emb)
    return [tuple(r.split("\t")[-2:]) for r in out.getvalue().splitlines()], stats


def _lines(side):
    with open(f"{EXAMPLES}/{side}.txt", encoding="utf-8") as f:
        return f.read().splitlines()


def _gold():
    with open(f"{EXAMPLES}/gold.tsv", encoding="utf-8") as f:
        return {tuple(line.rstrip("\n").split("\t")[:2]) for line in f if line.strip()}


def test_the_fast_models_own_vectors_as_the_assist_pick_what_the_fast_model_picks(tmp_path):
    model = load_model()
    paths = []
    for side in ("de", "en"):
        paths.append(str(tmp_path / f"{side}.npy"))
        np.save(paths[-1], encode(_lines(side), model))
    plain, _ = _mine(SMALL, tuple(paths))
    picked, stats = _mine(replace(SMALL, assist_pick=True), tuple(paths))
    assert picked == plain and len(plain) >= 10
    assert stats.signature.endswith("|assist-pick") or "|assist-pick|" in stats.signature
    assert "picks each line's candidate" in stats.info["settings"]


def test_an_assist_that_knows_the_translations_loses_none_and_picks_no_wrong_pair(tmp_path):
    gold = _gold()
    n_de, n_en = len(_lines("de")), len(_lines("en"))
    dim = n_de + n_en
    x, y = np.eye(dim, dtype=np.float32)[:n_de], np.eye(dim, dtype=np.float32)[n_de:]
    for s, t in gold:  # a translation shares its source's direction
        y[int(t) - 1] = x[int(s) - 1]
    paths = (str(tmp_path / "de.npy"), str(tmp_path / "en.npy"))
    np.save(paths[0], x)
    np.save(paths[1], y)
    plain, _ = _mine(SMALL, paths)
    picked, _ = _mine(replace(SMALL, assist_pick=True), paths)
    assert len(gold & set(picked)) >= len(gold & set(plain))
    assert set(picked) <= gold


def test_by_default_only_the_languages_measured_to_gain_pick(tmp_path):
    x = encode(_lines("de"), load_model())
    paths = (str(tmp_path / "de.npy"), str(tmp_path / "en.npy"))
    np.save(paths[0], x)
    np.save(paths[1], encode(_lines("en"), load_model()))
    assert pick.picks_for(("ar", "en")) and not pick.picks_for(("de", "en")) and "de" not in pick.PICKED_FOR
    _, stats = _mine(SMALL, paths)
    assert "picks each line's candidate" not in stats.info["settings"] and "|assist-pick" not in stats.signature
    _, stats = _mine(replace(SMALL, assist_pick=False), paths)
    assert "|assist-pick" not in stats.signature


def test_assist_pick_needs_an_assist():
    with pytest.raises(ConfigError, match="--assist-pick chooses candidates with the assist"):
        _mine(replace(SMALL, assist_pick=True), None)
    got = CliRunner().invoke(main, ["mine", f"{EXAMPLES}/de.txt", f"{EXAMPLES}/en.txt", "--assist-pick", "-q"])
    assert got.exit_code != 0 and "--assist-pick chooses candidates with the assist" in got.output
