"""Probe (not product code): a learned interaction scorer over the model's piece vectors, as a 33rd feature of the
second stage, measured on the calibration's dev tasks.

    python tools/probe_interaction.py dump --langs fr ru --out DIR [--lexicon-pairs 100000] [--draws 3]
    python tools/probe_interaction.py train --data DIR --out net.pt [--hidden 128] [--limit 0] [--synthetic 0]
    python tools/probe_interaction.py eval --data DIR --net net.pt [--hidden 128] --out result.json

The scorer is decomposable attention (Parikh et al. 2016) over the bundled model's frozen piece table: each piece
of one line is projected, softly aligned to the other line's pieces, compared with its alignment (a small MLP on
[a, b, a - b, a * b]), and the comparisons are pooled (mean and max each side, and the two lengths) into one
logit. A translation leaves no piece without a counterpart; a near miss leaves one (a negation, a pronoun, a
number), and the comparison learns which pieces matter, where the stage's fixed interaction features
(:mod:`bitextmine.judge.interaction`) weigh every piece alike.

``dump`` (per language, the bundled model and its shipped second stage): the candidates of the stage's own
training tasks (as tools/train_second_stage.py builds them: texts, the stage's features, labels), the candidates
of the calibration's dev tasks (tools/calibrate_second_stage.py's tasks at 1,000 lines and the dev pool's largest,
1/3/10/50 %, and news at 1/4/10 %, ``--draws`` draws, seed 0; its cells plus texts and features), and up to
``--lexicon-pairs`` of the pairs the IBM model 1 tables are trained on (no task pair, no held-apart pair) with,
for each, the model's 3 nearest non-translations each way among 20,000 of them (a line equal to the translation
up to :func:`bitextmine.judge.tasks.key` is not a non-translation).

``train``: the pairs of every dumped language, each with its 6 mined non-translations, one random English line
and ``--synthetic`` English lines changed in one meaningful place (:func:`perturb`) as negatives; binary cross
entropy, Adam with a one-cycle rate, bf16 autocast (where bf16 is slow, --fp32), one pass.

``eval``: per language, the stage's trees (SecondStageConfig's settings) refitted on the training tasks'
candidates with and without the scorer's logit, applied to the dev candidates and adjusted to each task's share
(as `mine` does); each variant at its own best probability floor (the mean F1 over the (kind, share) groups, in
sample, as the calibration chooses it). docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

MAX_PIECES = 40  # pieces a line the scorer reads
BLOCK = 20000  # lines among which the nearest non-translations are mined

# ---- near misses made from a translation: the English side changed in one meaningful place -------------------

SWAPS = {"he": "she", "she": "he", "him": "her", "her": "him", "his": "her", "i": "you", "you": "i", "we": "they",
         "they": "we", "me": "you", "us": "them", "them": "us", "my": "your", "your": "my", "our": "their",
         "their": "our", "this": "that", "that": "this", "these": "those", "those": "these",
         "before": "after", "after": "before", "import": "export", "export": "import", "open": "close",
         "close": "open", "enable": "disable", "disable": "enable", "show": "hide", "hide": "show", "add": "remove",
         "remove": "add", "first": "last", "last": "first", "next": "previous", "previous": "next",
         "up": "down", "down": "up", "left": "right", "right": "left", "more": "less", "less": "more",
         "today": "yesterday", "yesterday": "today", "start": "stop", "stop": "start", "old": "new", "new": "old",
         "big": "small", "small": "big", "all": "some", "some": "all"}
UNNEGATE = [(r"\bisn't\b", "is"), (r"\baren't\b", "are"), (r"\bwasn't\b", "was"), (r"\bdon't\b", "do"),
            (r"\bdoesn't\b", "does"), (r"\bdidn't\b", "did"), (r"\bcan't\b", "can"), (r"\bwon't\b", "will"),
            (r"\bnot\b ?", ""), (r"\bnever\b", "always")]
NEGATE = [(r"\bis\b", "isn't"), (r"\bare\b", "aren't"), (r"\bwas\b", "wasn't"), (r"\bcan\b", "can't"),
          (r"\bwill\b", "won't"), (r"\balways\b", "never")]
WORD = re.compile(r"\w+")


def perturb(text: str, rng: np.random.Generator) -> str | None:
    """``text`` (English) changed in one meaningful place, the kind of change tried in a seeded random order: a
    pronoun, demonstrative or opposite swapped, a negation removed (or added where there is none), a number
    changed, a word of 4+ letters dropped; None when no change applies."""
    changes = (_swap, _negation, _number, _drop)
    for k in rng.permutation(len(changes)):
        out = changes[k](text, rng)
        if out is not None and out != text:
            return out
    return None


def _swap(text: str, rng) -> str | None:
    hits = [m for m in WORD.finditer(text) if m.group().lower() in SWAPS]
    if not hits:
        return None
    m = hits[int(rng.integers(len(hits)))]
    new = SWAPS[m.group().lower()]
    return text[:m.start()] + (new.capitalize() if m.group()[0].isupper() else new) + text[m.end():]


def _negation(text: str, rng) -> str | None:
    rules = [r for r in UNNEGATE if re.search(r[0], text, re.I)] or [r for r in NEGATE if re.search(r[0], text, re.I)]
    if not rules:
        return None
    pattern, new = rules[int(rng.integers(len(rules)))]
    return re.sub(pattern, new, text, count=1, flags=re.I)


def _number(text: str, rng) -> str | None:
    hits = list(re.finditer(r"\d+", text))
    if not hits:
        return None
    m = hits[int(rng.integers(len(hits)))]
    value = int(m.group()) if len(m.group()) < 9 else 7
    return text[:m.start()] + str(value + int(rng.integers(1, 10))) + text[m.end():]


def _drop(text: str, rng) -> str | None:
    hits = [m for m in WORD.finditer(text) if len(m.group()) >= 4]
    if len(hits) < 2:
        return None
    m = hits[int(rng.integers(len(hits)))]
    out = re.sub(r"\s{2,}", " ", text[:m.start()] + text[m.end():]).strip()
    return re.sub(r"\s+([.,!?;:])", r"\1", out)


# ---- the scorer ----------------------------------------------------------------------------------------------

def make_scorer(table: np.ndarray, hidden: int):
    """Decomposable attention over the frozen piece table float (V, d) (unit rows and their log norms)."""
    import torch
    import torch.nn as nn

    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            t = torch.tensor(table, dtype=torch.float32)
            norm = t.norm(dim=1, keepdim=True).clamp_min(1e-6)
            self.emb = nn.Embedding.from_pretrained(torch.cat([t / norm, norm.log()], 1), freeze=True)
            self.proj = nn.Sequential(nn.Linear(t.shape[1] + 1, hidden), nn.ReLU())
            self.attend = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
            self.compare = nn.Sequential(nn.Linear(4 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
            self.out = nn.Sequential(nn.Linear(4 * hidden + 2, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def line(self, ids, mask):
            """ids int64 (B, L), mask bool (B, L) -> projected pieces and their attention keys, (B, L, h) each."""
            uniq, inv = torch.unique(ids, return_inverse=True)  # each piece projected once
            a = self.proj(self.emb(uniq))[inv] * mask[..., None]
            return a, self.attend(a)

        def forward(self, fx_ids, fx_mask, en_ids, en_mask):
            """The logits float (B,) of B pairs (padded piece ids and masks of each side)."""
            a, ka = self.line(fx_ids, fx_mask)
            b, kb = self.line(en_ids, en_mask)
            e = ka @ kb.transpose(1, 2)  # (B, n, m)
            low = torch.finfo(e.dtype).min / 4
            beta = torch.softmax(e.masked_fill(~en_mask[:, None, :], low), 2) @ b
            alpha = torch.softmax(e.masked_fill(~fx_mask[:, :, None], low), 1).transpose(1, 2) @ a
            v1 = self.compare(torch.cat([a, beta, a - beta, a * beta], -1)) * fx_mask[..., None]
            v2 = self.compare(torch.cat([b, alpha, b - alpha, b * alpha], -1)) * en_mask[..., None]
            n1, n2 = fx_mask.sum(1, keepdim=True).clamp_min(1), en_mask.sum(1, keepdim=True).clamp_min(1)
            pooled = torch.cat([v1.sum(1) / n1, v1.max(1).values, v2.sum(1) / n2, v2.max(1).values,
                                n1.float().log(), n2.float().log()], -1)
            return self.out(pooled)[:, 0]

    return Scorer()


def padded(seqs: list) -> tuple:
    """Piece id arrays (at most MAX_PIECES each are read) -> ids int64 (B, L), mask bool (B, L) as tensors; a line
    without pieces has one masked-in id 0, so that its softmax is defined."""
    import torch

    width = min(MAX_PIECES, max([1] + [len(s) for s in seqs]))
    ids, mask = np.zeros((len(seqs), width), np.int64), np.zeros((len(seqs), width), bool)
    for r, s in enumerate(seqs):
        s = np.asarray(s[:width])
        ids[r, :len(s)], mask[r, :max(len(s), 1)] = s, True
    return torch.from_numpy(ids), torch.from_numpy(mask)


def score_pairs(net, fx: list, en: list, bf16: bool, batch: int = 2048) -> np.ndarray:
    """The logits float32 (c,) of c pairs, fx[i] and en[i] their piece id arrays; batches of similar lengths."""
    import torch

    out = np.zeros(len(fx), np.float32)
    order = np.argsort([max(len(a), len(b)) for a, b in zip(fx, en)], kind="stable")
    net.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for s in range(0, len(order), batch):
            rows = order[s:s + batch]
            out[rows] = net(*padded([fx[r] for r in rows]), *padded([en[r] for r in rows])).float().numpy()
    return out


# ---- dump ----------------------------------------------------------------------------------------------------

def nearest_others(x: np.ndarray, y: np.ndarray, keys: list, k: int = 3) -> np.ndarray:
    """For each row i of x float32 (n, d) (unit rows), the k rows of y (n, d) nearest to it within its block of
    BLOCK rows, leaving out row i and the rows whose key equals keys[i]: int64 (n, k), -1 where fewer."""
    import faiss

    out = np.full((len(x), k), -1, np.int64)
    for s in range(0, len(x), BLOCK):
        e = min(len(x), s + BLOCK)
        index = faiss.IndexFlatIP(y.shape[1])
        index.add(np.ascontiguousarray(y[s:e], np.float32))
        _, hits = index.search(np.ascontiguousarray(x[s:e], np.float32), k + 5)
        for r, row in enumerate(hits):
            got = [s + int(j) for j in row if j >= 0 and s + j != s + r and keys[s + j] != keys[s + r]][:k]
            out[s + r, :len(got)] = got
    return out


def dump_language(lang: str, model, n_lexicon: int, draws: int) -> dict:
    """The training tasks' candidates, the dev tasks' candidates and lexicon pairs with their nearest others."""
    from calibrate_second_stage import cells_of, tasks_of
    from train_second_stage import corpora_of

    from bitextmine.config import SecondStageConfig
    from bitextmine.encoding import encode
    from bitextmine.judge.tasks import key
    from bitextmine.judge.train import labels, split_pairs, task_features, training_tasks

    stage, cfg = model.second_stage, SecondStageConfig()
    floor = float(stage.languages[lang]["floor"])
    lexicon, pools = split_pairs(corpora_of(lang, os.path.join(HERE, "..", ".bench", "holdout")), cfg.task_pairs,
                                 cfg.seed)
    train = []
    for task in training_tasks(pools, cfg):
        cands, X = task_features(task.src, task.tgt, model, stage, lang, floor)
        y = labels(cands, np.array(sorted(task.gold), np.int64).reshape(-1, 2) - 1)
        train.append({"X": X, "y": y, "fx": [task.src[i] for i in cands[:, 0]],
                      "en": [task.tgt[j] for j in cands[:, 1]]})
    dev = []
    for kind, share, label, t in tasks_of(lang, [0.01, 0.03, 0.1, 0.5], draws, 0, ("1000", "max"), (0.01, 0.04, 0.1)):
        cands, X = task_features(t.src, t.tgt, model, stage, lang, floor)
        dev.append(cells_of(t, cands, X, model, stage, lang) | {
            "kind": kind, "share": share, "label": label, "X": X,
            "fx": [t.src[i] for i in cands[:, 0]], "en": [t.tgt[j] for j in cands[:, 1]]})
    pick = np.random.default_rng(9).permutation(len(lexicon))[:n_lexicon]
    fx, en = [lexicon[i][0] for i in pick], [lexicon[i][1] for i in pick]
    x, y = encode(fx, model), encode(en, model)
    lex = {"fx": fx, "en": en, "neg_en": nearest_others(x, y, [key(t) for t in en]),
           "neg_fx": nearest_others(y, x, [key(t) for t in fx])}
    return {"train": train, "dev": dev, "lex": lex}


# ---- train ---------------------------------------------------------------------------------------------------

def batch_of(items: list, data: list, rng, synthetic: int, tokenizer) -> tuple[list, list, list]:
    """(foreign ids, English ids, labels) of the items [(language index, pair index)]: each pair, its mined
    non-translations, one random English line of its language, and ``synthetic`` near misses."""
    pairs, near_f, near_e = [], [], []
    for li, i in items:
        lex = data[li]
        fx, en = lex["fx_ids"], lex["en_ids"]
        pairs.append((fx[i], en[i], 1.0))
        pairs += [(fx[i], en[j], 0.0) for j in lex["neg_en"][i][lex["neg_en"][i] >= 0]]
        pairs += [(fx[j], en[i], 0.0) for j in lex["neg_fx"][i][lex["neg_fx"][i] >= 0]]
        random_line = int(rng.integers(len(en)))
        if random_line != i:
            pairs.append((fx[i], en[random_line], 0.0))
        for _ in range(synthetic):
            changed = perturb(lex["en"][i], rng)
            if changed:
                near_f.append(fx[i])
                near_e.append(changed)
    pairs += zip(near_f, tokenizer.encode_lists(near_e) if near_e else [], [0.0] * len(near_e))
    fxs, ens, ys = zip(*pairs)
    return list(fxs), list(ens), list(ys)


def train_scorer(data: list, tokenizer, table, hidden: int, batch: int, rate: float, limit: int, synthetic: int,
                 bf16: bool, seed: int = 0, init: dict | None = None, log=print):
    """One pass over the pairs of ``data`` (dumped lexicons with their piece ids), batches of similar lengths,
    from the weights ``init`` (a state dict) where given."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = make_scorer(table, hidden)
    if init is not None:
        net.load_state_dict(init)
    items = [(li, i) for li, lex in enumerate(data) for i in range(len(lex["fx"]))]
    if limit:
        items = [items[i] for i in rng.permutation(len(items))[:limit]]
    order = rng.permutation(len(items))
    lengths = np.array([len(data[items[k][0]]["fx_ids"][items[k][1]]) + len(data[items[k][0]]["en_ids"][items[k][1]])
                        for k in order])
    span = batch * 64  # sorted by length within spans of 64 batches, the batches then shuffled
    order = np.concatenate([order[s:s + span][np.argsort(lengths[s:s + span], kind="stable")]
                            for s in range(0, len(order), span)])
    starts = rng.permutation(np.arange(0, len(order), batch))
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=rate)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, rate, total_steps=len(starts), pct_start=0.05)
    t0 = time.perf_counter()
    for step, s in enumerate(starts, 1):
        fxs, ens, ys = batch_of([items[k] for k in order[s:s + batch]], data, rng, synthetic, tokenizer)
        net.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = net(*padded(fxs), *padded(ens)).float()
        loss = F.binary_cross_entropy_with_logits(logits, torch.tensor(ys))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 500 == 0 or step == len(starts):
            log(f"step {step}/{len(starts)} loss {loss.item():.4f} {time.perf_counter() - t0:.0f} s")
    return net


# ---- eval ----------------------------------------------------------------------------------------------------

def auc(scores: np.ndarray, hit: np.ndarray) -> float:
    """Area under the ROC curve of scores float (c,) against hit bool (c,) (ties by position)."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    n1 = int(hit.sum())
    n0 = len(hit) - n1
    return float((ranks[hit].sum() - n1 * (n1 + 1) / 2) / max(n1 * n0, 1))


def at_best_floor(dev: list) -> dict:
    """The floor of the calibration's grid with the best mean F1 over the (kind, share) groups of the dev cells
    (as the calibration chooses it), and each group's mean P/R/F1 there (in per cent)."""
    from calibrate_second_stage import GRID, mean_f1, prf_at

    tasks = [(c["kind"], c["share"], c["label"], c) for c in dev]
    mean = {p: mean_f1(tasks, p) for p in GRID}
    best = max(GRID, key=lambda p: (mean[p], -abs(p - 0.5)))
    groups: dict = {}
    for c in dev:
        groups.setdefault(f"{c['kind']} {c['share']}", []).append(prf_at(c, best))
    return {"floor": float(best), "mean_f1": round(100 * mean[best], 2),
            "groups": {k: [round(100 * float(x), 1) for x in np.mean(v, axis=0)] for k, v in sorted(groups.items())}}


def eval_language(d: dict, net, tokenizer, bf16: bool) -> dict:
    """Trees refitted without and with the scorer's logit on the training tasks, at their best dev floors."""
    from bitextmine.config import SecondStageConfig
    from bitextmine.judge.logistic import adjust_to_prior
    from bitextmine.judge.train import fit
    from bitextmine.judge.trees import predict_trees

    for part in d["train"] + d["dev"]:
        part["da"] = score_pairs(net, tokenizer.encode_lists(part["fx"]), tokenizer.encode_lists(part["en"]), bf16)
    X = np.concatenate([p["X"] for p in d["train"]])
    y = np.concatenate([p["y"] for p in d["train"]]).astype(bool)
    da = np.concatenate([p["da"] for p in d["train"]])
    hit = np.concatenate([c["hit"] for c in d["dev"]])
    out = {"auc_scorer_alone": auc(np.concatenate([c["da"] for c in d["dev"]]), hit)}
    for name, (train_X, dev_X) in {"trees": (X, lambda c: c["X"]),
                                   "trees + scorer": (np.c_[X, da], lambda c: np.c_[c["X"], c["da"]])}.items():
        trees = fit(train_X, y, SecondStageConfig())
        dev = [c | {"prob": adjust_to_prior(predict_trees(trees, dev_X(c)), float(y.mean()))[0]} for c in d["dev"]]
        out[name] = at_best_floor(dev) | {"auc": auc(np.concatenate([c["prob"] for c in dev]), hit)}
    return out


# ---- the command line ----------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["dump", "train", "eval"])
    ap.add_argument("--langs", nargs="+", default=["de", "fr", "es", "cs", "ru", "zh", "tr", "ar"])
    ap.add_argument("--data", default="", help="the dump's folder (dump: --out)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lexicon-pairs", type=int, default=100000)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--net", default="")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rate", type=float, default=2e-3)
    ap.add_argument("--limit", type=int, default=0, help="train on this many pairs, drawn over the languages (0: all)")
    ap.add_argument("--synthetic", type=int, default=0, help="near misses a pair (perturb)")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast (where bf16 products are slow)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default="", help="train: start from this scorer's weights (another pass)")
    args = ap.parse_args()
    import torch

    from bitextmine.model import load_model

    model = load_model(None)
    bf16 = not args.fp32
    if args.what == "dump":
        os.makedirs(args.out, exist_ok=True)
        for lang in args.langs:
            with open(os.path.join(args.out, f"{lang}.pkl"), "wb") as f:
                pickle.dump(dump_language(lang, model, args.lexicon_pairs, args.draws), f)
            print(f"{lang}: dumped", flush=True)
        return
    dumps = {}
    for lang in args.langs:
        with open(os.path.join(args.data, f"{lang}.pkl"), "rb") as f:
            dumps[lang] = pickle.load(f)
    if args.what == "train":
        data = [d["lex"] | {"fx_ids": model.tokenizer.encode_lists(d["lex"]["fx"]),
                            "en_ids": model.tokenizer.encode_lists(d["lex"]["en"])} for d in dumps.values()]
        net = train_scorer(data, model.tokenizer, model.embeddings, args.hidden, args.batch, args.rate, args.limit,
                           args.synthetic, bf16, args.seed, torch.load(args.init) if args.init else None,
                           log=lambda m: print(m, flush=True))
        torch.save(net.state_dict(), args.out)
        return
    net = make_scorer(model.embeddings, args.hidden)
    net.load_state_dict(torch.load(args.net))
    result = {}
    for lang, d in dumps.items():
        result[lang] = eval_language(d, net, model.tokenizer, bf16)
        print(lang, json.dumps(result[lang]), flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
