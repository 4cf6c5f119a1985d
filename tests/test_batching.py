"""Mega-batches of one topic (training.batching, ``batch_order topic``)."""

import os

import numpy as np
import pytest

from bitextmine.config import TrainConfig
from bitextmine.corpus import CorpusSpec
from bitextmine.errors import ConfigError
from bitextmine.loading import load_model
from bitextmine.training import train
from bitextmine.training.batching import cluster_labels, loose_key, pair_embeddings, topic_order
from bitextmine.training.data import text_ids

SMALL = dict(dim=16, epochs=2, batch_size=16, megabatch_max=3, megabatch_every=5, dev_pairs=100, device="cpu",
             checkpoint_every=0, batch_order="topic")


def reference_topic_order(perm, labels, seed):
    """The obvious version: draw as topic_order draws, give each draw its segment by counting the copies seen,
    then take the segments in turn and each segment's clusters in the drawn order."""
    rng = np.random.default_rng(seed)
    n_segments = max(list(perm).count(p) for p in set(perm))
    rank = rng.permutation(labels.max() + 1)
    first = rng.integers(0, n_segments, size=perm.max() + 1)
    shuffled = perm[rng.permutation(len(perm))]
    seen, segment = {}, []
    for p in shuffled:
        segment.append((first[p] + seen.get(p, 0)) % n_segments)
        seen[p] = seen.get(p, 0) + 1
    return np.array([p for s in range(n_segments) for c in np.argsort(rank)
                     for p, sp in zip(shuffled, segment) if sp == s and labels[p] == c], np.int64)


def test_topic_order_matches_the_reference_and_keeps_every_draw():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 7, size=50)
    perm = rng.integers(0, 50, size=80)  # repeats, as temperature sampling draws them
    got = topic_order(perm, labels, seed=11)
    np.testing.assert_array_equal(got, reference_topic_order(perm, labels, 11))
    np.testing.assert_array_equal(np.sort(got), np.sort(perm))
    once = rng.permutation(50)  # no repeats: one segment, each cluster in one run
    got = topic_order(once, labels, seed=2)
    np.testing.assert_array_equal(got, reference_topic_order(once, labels, 2))
    assert (labels[got][1:] != labels[got][:-1]).sum() == len(np.unique(labels)) - 1


def test_copies_of_a_pair_fall_in_different_segments():
    """A pair drawn 3 times (temperature sampling) has its copies a third of the epoch apart or more, not
    side by side in its cluster's run."""
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 5, size=300)
    perm = np.concatenate([np.arange(300), rng.choice(100, 100, replace=False), np.arange(50)])
    got = topic_order(perm, labels, seed=3)
    positions = {}
    for i, p in enumerate(got):
        positions.setdefault(p, []).append(i)
    gaps = [min(np.diff(pos)) for pos in positions.values() if len(pos) > 1]
    assert len(gaps) == 100 and min(gaps) > 60  # a cluster's run in a segment: about 30 draws


def test_cluster_labels_find_separated_topics():
    rng = np.random.default_rng(0)
    centres = np.linalg.qr(rng.normal(size=(32, 4)))[0].T  # 4 orthonormal directions
    truth = rng.integers(0, 4, size=2000)
    x = centres[truth] + 0.05 * rng.normal(size=(2000, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    labels = cluster_labels(x, 4, seed=1)
    for t in range(4):  # each true topic lands in one cluster, and no two topics share one
        assert len(np.unique(labels[truth == t])) == 1
    assert len(np.unique(labels)) == 4
    assert (cluster_labels(x, 1, seed=1) == 0).all()


def test_pair_embeddings_are_the_normalised_sum_of_both_sides():
    rng = np.random.default_rng(1)
    s, t = rng.normal(size=(7, 5)).astype(np.float32), rng.normal(size=(7, 5)).astype(np.float32)
    sides = {"src": s / np.linalg.norm(s, axis=1, keepdims=True), "tgt": t / np.linalg.norm(t, axis=1, keepdims=True)}
    got = pair_embeddings(lambda side, rows: sides[side][rows], 7, chunk=3)
    want = sides["src"] + sides["tgt"]
    np.testing.assert_allclose(got, want / np.linalg.norm(want, axis=1, keepdims=True), rtol=1e-6)


def test_loose_text_ids_join_lines_differing_in_case_space_and_end_punctuation():
    assert loose_key(" Enlarge  images.") == loose_key("enlarge images") == "enlarge images"
    assert loose_key("Ｆｉｌｅ") == "file"
    ids = text_ids(["Open file", "«open file!»", "Open files", "...", "?!", "..."], loose_key)
    assert ids[0] == ids[1] != ids[2]
    assert ids[3] == ids[5] != ids[4]  # nothing left: the text itself is the key
    for a, b in [("काम", "कम"), ("ที่", "ท"), ("1.5", "15"), ("C++", "C"), ("-5 °C", "5 °C"), ("I'll", "ill")]:
        assert loose_key(a) != loose_key(b), (a, b)  # marks, inner punctuation, symbols and signs stay


def test_topic_batches_train_resume_to_the_same_model_and_are_checked(tmp_path, toy_files, toy_model):
    spec = [CorpusSpec(src=toy_files[0], tgt=toy_files[1])]
    spm = os.path.join(toy_model.path, "sentencepiece.model")
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    train(spec, full, config=TrainConfig(**SMALL), tokenizer_path=spm)
    train(spec, part, config=TrainConfig(**SMALL, max_steps=40), tokenizer_path=spm)  # mid-epoch 1
    train(spec, part, config=TrainConfig(**SMALL), tokenizer_path=spm, resume=True)
    a, b = load_model(full), load_model(part)
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    training = a.config["training"]
    assert training["batch_order"] == "topic" and training["dev_history"][-1]["scores"]["heldout"] > 80
    train(spec, part, config=TrainConfig(**SMALL, max_steps=5), tokenizer_path=spm)
    with pytest.raises(ConfigError, match="batch_order"):
        train(spec, part, config=TrainConfig(**{**SMALL, "batch_order": "random"}), tokenizer_path=spm, resume=True)
    with pytest.raises(ConfigError, match="batch order 'clusters'"):
        train(spec, str(tmp_path / "bad"), config=TrainConfig(**{**SMALL, "batch_order": "clusters"}),
              tokenizer_path=spm)


def test_topic_mega_batches_hold_harder_negatives_than_random_ones():
    """On pairs from 20 topics, a topic order's mega-batches hold one or two topics (clusters straddle the
    batches' edges), a random order's all of them."""
    from bitextmine.training.data import epoch_order

    rng = np.random.default_rng(5)
    centres = rng.normal(size=(20, 16))
    topic = rng.integers(0, 20, size=4000)
    x = (centres[topic] + 0.3 * rng.normal(size=(4000, 16))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    perm = epoch_order(1, 0, 4000)
    ordered = topic_order(perm, cluster_labels(x, 20, seed=1), seed=1)

    def share_of_main_topic(order):
        return np.mean([np.bincount(topic[order[a : a + 200]]).max() / 200 for a in range(0, 4000, 200)])

    assert share_of_main_topic(ordered) > 0.5 > 0.15 > share_of_main_topic(perm)


def test_cli_train_takes_the_batch_order(tmp_path, toy_files, toy_model):
    from click.testing import CliRunner

    from bitextmine.cli import main

    r = CliRunner().invoke(main, ["train", "--src", toy_files[0], "--tgt", toy_files[1], "--epochs", "1", "--dev-pairs",
                                  "50", "--device", "cpu", "-q", "--dim", "16", "--batch-size", "256", "--spm-model",
                                  os.path.join(toy_model.path, "sentencepiece.model"), "--batch-order", "topic",
                                  "--out", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    assert load_model(str(tmp_path / "m")).config["training"]["batch_order"] == "topic"
    r = CliRunner().invoke(main, ["train", "--src", toy_files[0], "--tgt", toy_files[1], "--untrained",
                                  "--batch-order", "topic", "--out", str(tmp_path / "u")])
    assert r.exit_code != 0 and "--batch-order" in r.output and "--untrained" in r.output, r.output


def test_paraphrase_pools_join_loose_repeats_across_sides_under_topic_order():
    from bitextmine.training.data import shared_text_ids

    ts, tt = shared_text_ids(["Open file", "Close"], ["open file.", "Save"], key=loose_key)
    assert ts[0] == tt[0] and len({*ts, *tt}) == 3
    ts, tt = shared_text_ids(["..."], ["?!"], key=loose_key)  # nothing left of either: each its own text
    assert ts[0] != tt[0]
    ts, tt = shared_text_ids(["Open file"], ["open file."])
    assert ts[0] != tt[0]
