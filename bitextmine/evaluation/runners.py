"""The ``bitextmine eval`` runners: encode a benchmark with a model (or read precomputed embeddings),
score it with :mod:`bitextmine.evaluation`, and return a report that renders as a plain table or JSON.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from ..config import EmbeddingsConfig, EncodeConfig, MineConfig
from ..encoding.pipeline import side_configs
from ..errors import ConfigError, CorpusError
from ..report import pyplot, table
from .metrics import (PRF, BuccCandidates, STSResult, TatoebaResult, best_threshold, bucc_candidates,
                      evaluate_threshold, prf_curve, sts_eval, tatoeba_eval, year_averages)
from .readers import STSData, find_tatoeba, read_bucc_gold, read_bucc_sentences, read_sts, read_sts_crosslingual


def _encode(texts: Sequence[str], model, config: EncodeConfig) -> np.ndarray:
    from ..encoding.pipeline import encode

    if model is None:
        raise ConfigError("no model to encode the benchmark with; expected --model (or precomputed embeddings)")
    return encode(list(texts), model, config=config)


def _embeddings(path: str, model, lines: Sequence[str], config: EncodeConfig, emb_config: EmbeddingsConfig,
                text: str) -> np.ndarray:
    """Precomputed embeddings of ``lines`` (of ``text``) as float32 (len(lines), dim): any encoder's, in
    ``emb_config``'s format; the model, and the text encoded (``lines``, read from ``text``), are checked only
    for a file with a sidecar (:func:`open_embeddings`). Another encoder's rows are L2-normalised (zero rows stay
    zero), as `mine` takes them: every score here is a cosine."""
    from ..encoding.external import has_sidecar, open_embeddings
    from ..judge.interaction import unit_rows

    own = has_sidecar(path)
    x = open_embeddings(path, fmt=emb_config.format, dim=emb_config.dim, fp16=emb_config.fp16, rows=len(lines),
                        text=text, model=model, sif=config.sif, marked=config.marked,
                        text_sha256=text_digests(lines, text) if own else None)
    # bitextmine's own rows are L2-normalised; another encoder's (LASER's are not unit length) are made so, as
    # mine does
    return np.asarray(x, np.float32) if own else unit_rows(x)


def text_digests(lines: Sequence[str], text: str) -> tuple[str, ...]:
    """The sha256s that 'bitextmine encode' records for the text of ``lines``: of the file ``text`` (its
    decompressed bytes, when it is a file) and of the lines one per line ('\n' after each), as a column or
    field extracted to a file of its own gives them."""
    import hashlib

    from ..corpus import file_checksum

    lines_sha = hashlib.sha256("".join(line + "\n" for line in lines).encode("utf-8")).hexdigest()
    return (lines_sha, file_checksum(text)) if os.path.isfile(text) else (lines_sha,)


# --- STS -----------------------------------------------------------------------------------------


@dataclass
class STSReport:
    results: list[STSResult]
    years: dict[str, tuple[float, float]]

    def to_json(self) -> dict:
        return {"datasets": [asdict(r) for r in self.results],
                "years": {y: {"pearson": p, "spearman": s} for y, (p, s) in self.years.items()}}

    def to_table(self) -> str:
        rows = [[r.name if not r.year else f"{r.year} {r.name}", r.n, r.pearson, r.spearman] for r in self.results]
        rows += [[f"{y} average", sum(r.n for r in self.results if r.year == y), p, s] for y, (p, s) in self.years.items()]
        return table(["dataset", "pairs", "pearson", "spearman"], rows)


def run_sts(files: Sequence[str] = (), pairs: Sequence[tuple[str, str]] = (), *, model=None,
            config: EncodeConfig = EncodeConfig(), emb: tuple[str, str] | None = None,
            emb_config: EmbeddingsConfig = EmbeddingsConfig(), marked: str | None = None) -> STSReport:
    """Pearson and Spearman x 100 for each STS file (any format :func:`read_sts` reads) and each
    cross-lingual (file1, file2) pair; per-year averages for the SemEval sets. ``emb`` = precomputed
    embeddings of the s1 and s2 columns of the only dataset (``bitextmine encode`` outputs, or any encoder's in
    ``emb_config``'s format: :func:`bitextmine.encoding.external.open_embeddings`); ``marked``
    = "s1" or "s2" for the column in the marked language of a separate-vocabulary model."""
    c1, c2 = side_configs(config, marked, ("s1", "s2"))
    datasets: list[STSData] = [read_sts(p) for p in files] + [read_sts_crosslingual(a, b) for a, b in pairs]
    if not datasets:
        raise ConfigError("no STS data given; expected FILE... or --pair FILE1 FILE2")
    if emb is not None and len(datasets) != 1:
        raise ConfigError("precomputed embeddings (--emb1/--emb2) go with exactly one STS dataset")
    results = []
    for d in datasets:
        if emb is not None:
            t1, t2 = (f"{files[0]} (s1)", f"{files[0]} (s2)") if files else pairs[0]
            x1, x2 = _embeddings(emb[0], model, d.s1, c1, emb_config, t1), _embeddings(emb[1], model, d.s2, c2,
                                                                                      emb_config, t2)
        else:
            x1, x2 = _encode(d.s1, model, c1), _encode(d.s2, model, c2)
        results.append(sts_eval(x1, x2, d))
    return STSReport(results, year_averages(results))


def find_sts_files(folder: str) -> list[str]:
    """Every SemEval ``*.input.*.txt`` under ``folder`` that has its gold file, sorted."""
    found = []
    for root, _, names in os.walk(folder):
        for n in names:
            if ".input." in n and n.endswith(".txt") and os.path.exists(os.path.join(root, n.replace(".input.", ".gs.", 1))):
                found.append(os.path.join(root, n))
    return sorted(found)


# --- Tatoeba -------------------------------------------------------------------------------------


@dataclass
class TatoebaReport:
    results: list[TatoebaResult]

    def to_json(self) -> dict:
        return {"languages": [{**asdict(r), "accuracy": r.accuracy} for r in self.results],
                "mean_accuracy": self.mean_accuracy}

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean([r.accuracy for r in self.results]))

    def to_table(self) -> str:
        rows = [[r.name, r.n, r.error_src_tgt, r.error_tgt_src, r.accuracy] for r in self.results]
        if len(rows) > 1:
            rows.append(["mean", sum(r.n for r in self.results), float(np.mean([r.error_src_tgt for r in self.results])),
                         float(np.mean([r.error_tgt_src for r in self.results])), self.mean_accuracy])
        return table(["set", "pairs", "err src->tgt %", "err tgt->src %", "accuracy %"], rows)


def run_tatoeba(src: str | None = None, tgt: str | None = None, *, folder: str | None = None, model=None,
                config: EncodeConfig = EncodeConfig(), emb: tuple[str, str] | None = None,
                emb_config: EmbeddingsConfig = EmbeddingsConfig(), languages: Sequence[str] = (),
                marked: str | None = None) -> TatoebaReport:
    """Tatoeba xsim error rates for two aligned files, or for every language of a Tatoeba v1
    ``folder`` (optionally only ``languages``); ``marked`` = "src" or "tgt" (separate vocabularies).

    ``emb``: precomputed embeddings of SRC and TGT, in ``emb_config``'s format
    (:func:`bitextmine.encoding.external.open_embeddings`): ``model`` may then be None, unless a file has
    the sidecar of ``bitextmine encode`` (its model is checked)."""
    cs, ct = side_configs(config, marked, ("src", "tgt"))
    from ..corpus import read_parallel

    if folder:
        sets = [(lang, a, b) for lang, a, b in find_tatoeba(folder) if not languages or lang in languages]
        if languages and len(sets) != len(set(languages)):
            missing = sorted(set(languages) - {s[0] for s in sets})
            raise CorpusError(f"{folder}: no Tatoeba files for {', '.join(missing)}")
    elif src and tgt:
        if languages:
            raise ConfigError(f"--lang {' --lang '.join(languages)}: picks languages of an --all folder; "
                              "SRC TGT are evaluated as they are")
        sets = [(os.path.basename(src), src, tgt)]
    else:
        raise ConfigError("expected SRC TGT files or --all DIR")
    if emb is not None and len(sets) != 1:
        raise ConfigError("precomputed embeddings (--src-emb/--tgt-emb) go with one SRC TGT pair")
    results = []
    for name, a, b in sets:
        xa, xb = read_parallel(a, b)
        if not xa:
            raise CorpusError(f"{a}: empty; expected aligned sentences")
        if emb is not None:
            x, y = _embeddings(emb[0], model, xa, cs, emb_config, a), _embeddings(emb[1], model, xb, ct, emb_config, b)
        else:
            x, y = _encode(xa, model, cs), _encode(xb, model, ct)
        results.append(tatoeba_eval(x, y, name))
    return TatoebaReport(results)


# --- BUCC ----------------------------------------------------------------------------------------


@dataclass
class BuccReport:
    result: PRF
    oracle: bool
    tuned_on: str | None
    tune_result: PRF | None
    curve: dict = field(default_factory=dict)  # threshold, precision, recall, f1 arrays of the evaluated set
    search_recall: list | None = None  # recall@k of the approximate search per direction (--recall-check), or None

    def to_json(self) -> dict:
        return {"precision": self.result.precision, "recall": self.result.recall, "f1": self.result.f1,
                "threshold": self.result.threshold, "predicted": self.result.predicted,
                "correct": self.result.correct, "gold": self.result.gold, "oracle": self.oracle,
                "tuned_on": self.tuned_on, "tune_f1": self.tune_result.f1 if self.tune_result else None,
                **({"search_recall": self.search_recall} if self.search_recall else {})}

    def to_table(self) -> str:
        r = self.result
        label = "ORACLE (threshold tuned on the evaluated set)" if self.oracle else (
            f"threshold tuned on {self.tuned_on}" if self.tuned_on else "threshold given")
        rows = [["precision %", 100 * r.precision], ["recall %", 100 * r.recall], ["F1 %", 100 * r.f1],
                ["threshold", f"{r.threshold:.4f}"], ["pairs predicted", r.predicted], ["correct", r.correct],
                ["gold pairs", r.gold]]
        if self.search_recall:  # source to target, then target to source
            rows.append(["search recall@k (src->tgt / tgt->src)", " / ".join(f"{v:.3f}" for v in self.search_recall)])
        return table(["BUCC", label], rows)


def _bucc_set(files: tuple[str, str, str], model, config: EncodeConfig, mine: MineConfig,
              emb: tuple[str, str] | None = None, marked: str | None = None, progress=None,
              emb_config: EmbeddingsConfig = EmbeddingsConfig()) -> BuccCandidates:
    src, tgt, gold_path = files
    sid, stext = read_bucc_sentences(src)
    tid, ttext = read_bucc_sentences(tgt)
    gold = read_bucc_gold(gold_path)
    known_s, known_t = set(sid), set(tid)
    for a, b in gold:
        if a not in known_s or b not in known_t:
            raise CorpusError(f"{gold_path}: pair {a}\t{b} names an id missing from {src if a not in known_s else tgt}")
    cs, ct = side_configs(config, marked, ("src", "tgt"))
    if emb is not None:
        x = _embeddings(emb[0], model, stext, cs, emb_config, src)
        y = _embeddings(emb[1], model, ttext, ct, emb_config, tgt)
    else:
        x, y = _encode(stext, model, cs), _encode(ttext, model, ct)
    return bucc_candidates(x, y, sid, tid, gold, config=mine, name=os.path.basename(src), texts=(stext, ttext),
                           progress=(lambda n: progress(os.path.basename(src), n)) if progress else None)


def run_bucc(files: tuple[str, str, str], *, tune_on: tuple[str, str, str] | None = None, oracle: bool = False,
             threshold: float | None = None, model=None, config: EncodeConfig = EncodeConfig(),
             mine: MineConfig = MineConfig(), emb: tuple[str, str] | None = None,
             emb_config: EmbeddingsConfig = EmbeddingsConfig(), marked: str | None = None,
             progress=None) -> BuccReport:
    """BUCC 2018 protocol on ``files`` = (source sentences, target sentences, gold). The threshold is
    tuned for F1 on ``tune_on`` (another set), or on the evaluated set itself with ``oracle``, or
    given as ``threshold``; exactly one of the three. ``marked``: "src" or "tgt" (separate vocabularies).
    ``emb``: precomputed embeddings of the evaluated set's sentences (in the files' order), in
    ``emb_config``'s format (:func:`bitextmine.encoding.external.open_embeddings`); ``model`` may then be
    None, unless a file has a sidecar or ``tune_on`` is given (that set is encoded).
    ``progress(set_name, n)`` is called as k-NN query rows of each set are searched."""
    if sum(x is not None and x is not False for x in (tune_on, threshold)) + bool(oracle) != 1:
        raise ConfigError("give exactly one of --tune-on SRC TGT GOLD, --oracle or --threshold")
    if tune_on is not None and _same_texts(tune_on, files):
        oracle = True  # tuned on the evaluated set itself, under another name or path: an oracle all the same
    cand = _bucc_set(files, model, config, mine, emb, marked, progress, emb_config)
    tune_result = None
    if tune_on is not None:
        t = _bucc_set(tune_on, model, config, mine, marked=marked, progress=progress)
        threshold = best_threshold(t.scores, t.correct, t.n_gold)
        tune_result = evaluate_threshold(t.scores, t.correct, t.n_gold, threshold)
    elif oracle:
        threshold = best_threshold(cand.scores, cand.correct, cand.n_gold)
    result = evaluate_threshold(cand.scores, cand.correct, cand.n_gold, float(threshold))
    order = np.argsort(-cand.scores, kind="stable")
    p, r, f = prf_curve(cand.scores[order], cand.correct[order], cand.n_gold)
    curve = {"threshold": cand.scores[order], "precision": p, "recall": r, "f1": f}
    return BuccReport(result, oracle, os.path.basename(tune_on[0]) if tune_on else None, tune_result, curve,
                      cand.extra.get("recall"))


def _same_texts(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether the files of two BUCC sets hold the same bytes, file by file."""
    from ..corpus import file_checksum

    return all(os.path.getsize(p) == os.path.getsize(q) for p, q in zip(a, b)) and \
        all(file_checksum(p) == file_checksum(q) for p, q in zip(a, b))


def plot_bucc(report: BuccReport, path: str) -> None:
    """Write a PNG of precision, recall and F1 against the threshold (needs matplotlib: the ``plot`` extra)."""
    plt = pyplot()
    c = report.curve
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in ("precision", "recall", "f1"):
        ax.plot(c["threshold"], c[key], label=key)
    ax.axvline(report.result.threshold, color="grey", linestyle="--",
               label=f"threshold {report.result.threshold:.3f}" + (" (ORACLE)" if report.oracle else ""))
    ax.set_xlabel("margin score threshold (pairs kept: score >= threshold)")
    ax.set_ylabel("value")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower left")
    ax.set_title(f"BUCC: F1 {100 * report.result.f1:.2f} at threshold {report.result.threshold:.3f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
