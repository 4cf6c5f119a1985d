"""The second stage in a model directory: ``second_stage/second_stage.json`` (the classifier of each
language paired with English, its probability floor and its margin floor) beside the IBM model 1 tables
``second_stage/ibm1.en-XX.npz`` (t(XX|en)) and ``ibm1.XX-en.npz`` (t(en|XX)), made for the model's
vocabulary (:mod:`bitextmine.lexicon.ibm1`), and (format 5) ``second_stage/expected.XX.npz``: each piece's usual
log best link in translations under those tables, ``fx`` float32 (V,) (XX's pieces given English) and ``en``
float32 (V,) (:func:`bitextmine.lexicon.expected_links`), from which the deficit features are measured.

    {"format_version": 5, "features": [...], "chosen_on": "...",
     "languages": {"fr": {"classifier": "trees", "min_prob": 0.5, "floor": 1.0, "prior": 0.16,
                          "max_lines": 30000, "trained_on": "..."},
                   "de": {"classifier": "logistic", "mean": [26 numbers], "std": [...], "w": [...], "b": 0.1,
                          ...}, ...}}

``classifier``: "trees", gradient-boosted trees in ``second_stage/trees.XX.npz`` (:mod:`bitextmine.judge.trees`),
or "logistic", the logistic regression's numbers in the JSON (:mod:`bitextmine.judge.logistic`; format 2, still
read, had only these, without the key). ``features``: format 5 has :data:`bitextmine.judge.features.FEATURES`, the
interaction of the model's piece vectors among them (so the stage is loaded with the model's table) and the
deficits; format 4, still read, all but the deficits; formats 2 and 3 the 20 of
:data:`bitextmine.judge.features.BASE`.
``min_prob``: the probability a pair needs (calibrated on dev data); ``floor``: the margin below which a
candidate is not judged (dropped), which bounds the cost; ``prior``: the share of translations among the
training candidates, from which each run's probabilities are adjusted to its own share
(:func:`bitextmine.judge.logistic.adjust_to_prior`); ``max_lines``: the largest side, in distinct lines,
whose own margins the stage judges (the sizes it was calibrated on); a larger run gives it margins as sides of
max_lines lines give them (:mod:`bitextmine.mining.reference`). Checked on
load: the format version, the feature names, each language's numbers, that its files are there; a table and
the trees when first used (the table's vocabulary fingerprint, the trees' arrays).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ModelFormatError, is_finite_number, is_version, regular_file
from .features import BASE, DEFICIT, FEATURES, Pieces, pair_features
from .logistic import predict

# 5: the deficits among the features, each language's expected links; 4: the piece vectors' interaction among
# the features; 3: gradient-boosted trees or a logistic regression; 2: a logistic regression; 1: 8 features
FORMAT_VERSION = 5
READS = (2, 3, 4, 5)
FEATURES_OF = {2: BASE, 3: BASE, 4: FEATURES[:-len(DEFICIT)], 5: FEATURES}
FOLDER = "second_stage"
FILE = "second_stage.json"
NUMBERS = ("min_prob", "floor", "prior", "max_lines")
LOGISTIC = ("b",)  # and VECTORS
VECTORS = ("mean", "std", "w")
CLASSIFIERS = ("trees", "logistic")


def table_file(src: str, tgt: str) -> str:
    """The IBM1 table t(tgt|src) of a second-stage folder."""
    return f"ibm1.{src}-{tgt}.npz"


def expected_file(lang: str) -> str:
    """Each piece's usual best link for ``lang`` (format 5) in a second-stage folder."""
    return f"expected.{lang}.npz"


def trees_file(lang: str) -> str:
    """The trees of ``lang``'s classifier in a second-stage folder."""
    return f"trees.{lang}.npz"


def kind(c: dict) -> str:
    """The classifier of a language's entry: "trees" or "logistic" (format 2 had no key)."""
    return c.get("classifier", "logistic")


@dataclass
class SecondStage:
    """A model's second stage: ``languages`` {code: classifier and floors} (module docstring), read from
    ``folder``; the tables are loaded on first use and kept. ``features``: the names its classifiers take;
    ``embeddings``: the model's piece table float (V, d), which the interaction features need."""

    folder: str
    languages: dict
    chosen_on: str = ""
    fingerprint: str | None = None
    _tables: dict = field(default_factory=dict, repr=False)
    _trees: dict = field(default_factory=dict, repr=False)
    _expected: dict = field(default_factory=dict, repr=False)
    features: tuple = FEATURES
    embeddings: np.ndarray | None = field(default=None, repr=False)
    _vectors: np.ndarray | None = field(default=None, repr=False)
    # a model2vec export's tokenizer gives each run of unknown characters one id past the vocabulary (its row the
    # <unk> row: bitextmine.interop.export); the tables know that run as this <unk> piece. None: no such ids
    unk_id: int | None = None

    def vectors(self) -> np.ndarray | None:
        """The model's unit piece vectors float32 (V, d) when the features need them, else None; made once."""
        if len(self.features) == len(BASE):
            return None
        if self._vectors is None:
            if self.embeddings is None:
                raise ModelFormatError(f"{self.folder}: this second stage needs the model's piece vectors; load it "
                                       "with the model (load_second_stage(..., embeddings=model.embeddings))")
            from .interaction import unit_rows

            self._vectors = unit_rows(self.embeddings)
        return self._vectors

    def pair_features(self, lang: str, src: Pieces, tgt: Pieces, s: np.ndarray, t: np.ndarray, margin: np.ndarray,
                      cosine: np.ndarray, z: np.ndarray, src_is_english: bool = False) -> np.ndarray:
        """The features float64 (c, len(features)) of the candidates (src row s, tgt row t) int (c,) for ``lang``'s
        classifier (:func:`bitextmine.judge.features.pair_features`), oriented foreign / English whatever the
        order of the run (``src_is_english``: the English side is the source)."""
        if src_is_english:
            src, tgt, s, t = tgt, src, t, s
        tables = self.tables(lang)
        if self.unk_id is not None:  # the unknown run's id, past the tables' vocabularies, read as <unk>
            # each side against its own vocabulary: the source side of t(en|lang) is lang's, of t(lang|en) English's
            src, tgt = self._known(src, tables[1].vocab_src), self._known(tgt, tables[0].vocab_src)
        return pair_features(tables, src, tgt, s, t, margin, cosine, z, self.vectors(), self.expected(lang))

    def _known(self, pieces: Pieces, vocab: int) -> Pieces:
        return replace(pieces, ids=np.where(pieces.ids >= vocab, self.unk_id, pieces.ids))

    def reference_lines(self, lang: str, rows: tuple) -> int:
        """The rows R of the samples from which ``lang``'s stage is given reference margins in a run whose sides have
        ``rows`` distinct lines (one int per side): its ``max_lines`` when a side has more, else 0 (the run's own
        margins; :mod:`bitextmine.mining.reference`)."""
        limit = int(self.languages[lang]["max_lines"])
        return limit if max(rows) > limit else 0

    def tables(self, lang: str) -> tuple:
        """(t(lang|en), t(en|lang)) for ``lang``; ModelFormatError if missing, damaged or for another vocabulary."""
        from ..lexicon import load_table

        if lang not in self._tables:
            self._tables[lang] = tuple(load_table(os.path.join(self.folder, table_file(a, b)), fingerprint=self.fingerprint,
                                                  languages=(a, b)) for a, b in (("en", lang), (lang, "en")))
        return self._tables[lang]

    def expected(self, lang: str) -> tuple | None:
        """(each of ``lang``'s pieces' usual log best link float32 (V,), each English piece's) when the features have
        the deficits, else None; ModelFormatError if missing or damaged."""
        if DEFICIT[0] not in self.features:
            return None
        if lang not in self._expected:
            path = os.path.join(self.folder, expected_file(lang))
            tables = self.tables(lang)
            arrays = _load_arrays(path, "expected links")
            _check_language_of(arrays, lang, path)
            pair = (arrays.get("fx"), arrays.get("en"))
            for a, table in zip(pair, tables):
                if a is None or a.shape != (table.vocab_tgt,) or a.dtype != np.float32 or not np.isfinite(a).all():
                    raise ModelFormatError(f"{path}: expected finite float32 arrays fx and en of "
                                           f"{tables[0].vocab_tgt} and {tables[1].vocab_tgt} pieces")
            self._expected[lang] = pair
        return self._expected[lang]

    def trees(self, lang: str) -> dict:
        """``lang``'s trees (:mod:`bitextmine.judge.trees`); ModelFormatError if missing or damaged."""
        from .trees import check_trees

        if lang not in self._trees:
            path = os.path.join(self.folder, trees_file(lang))
            arrays = _load_arrays(path, "trees")
            _check_language_of(arrays, lang, path)
            problem = check_trees(arrays, len(self.features))
            if problem:
                raise ModelFormatError(f"{path}: damaged trees: {problem}")
            self._trees[lang] = arrays
        return self._trees[lang]

    def probability(self, lang: str, X: np.ndarray) -> np.ndarray:
        """P(translation) float64 (c,) of the feature rows X float (c, len(features)) under ``lang``'s classifier,
        at the share of translations it was trained with."""
        c = self.languages[lang]
        if kind(c) == "trees":
            from .trees import predict_trees

            return predict_trees(self.trees(lang), X)
        return predict({k: np.asarray(v, np.float64) if k in VECTORS else v for k, v in c.items()}, X)

    def adjusted(self, lang: str, X: np.ndarray) -> np.ndarray:
        """:meth:`probability` adjusted to the share of translations among the candidates X themselves (all the
        candidates of one run): float64 (c,)."""
        return self.adjust(lang, self.probability(lang, X))

    def unmapped(self) -> "SecondStage":
        """This stage without the score maps of its calibration (the loaded tables shared): the score the assist's
        joined score was fitted on (:mod:`bitextmine.assist.joined`)."""
        return replace(self, languages={k: {n: v for n, v in c.items() if n != "score_map"}
                                        for k, c in self.languages.items()})

    def adjust(self, lang: str, p: np.ndarray, mapped: bool = True) -> np.ndarray:
        """Probabilities p float (c,) from :meth:`probability`, adjusted to the share of translations among
        those c candidates (all the candidates of one run), then, where the model's calibration holds a score map
        for ``lang`` ("score_map": :func:`bitextmine.judge.logistic.map_score`) and ``mapped``, mapped by it with
        the run's share (the mean of p): float64 (c,)."""
        from .logistic import adjust_to_prior, map_score

        out = adjust_to_prior(p, float(self.languages[lang]["prior"]))[0]
        found = self.languages[lang].get("score_map")
        return map_score(out, float(np.mean(p)), found) if mapped and found and len(out) else out


def _check_language_of(arrays: dict, lang: str, path: str) -> None:
    """ModelFormatError when arrays read for ``lang`` record another language ("language"; files written before
    it was recorded have none and pass)."""
    made = arrays.pop("language", None)
    if made is not None and str(made) != lang:
        raise ModelFormatError(f"{path}: made for {str(made)!r}, not {lang!r} as its name says")


def load_second_stage(model_dir: str, fingerprint: str | None = None, embeddings: np.ndarray | None = None,
                      unk_id: int | None = None) -> SecondStage | None:
    """The second stage of a model directory, or None when it has none; ``embeddings`` the model's piece table
    float (V, d) (:attr:`SecondStage.embeddings`); ``unk_id`` (:attr:`SecondStage.unk_id`). Raises
    ModelFormatError when its file is unreadable, of another version, or lacks a number or a table."""
    folder = os.path.join(model_dir, FOLDER)
    path = os.path.join(folder, FILE)
    if not os.path.exists(folder):
        return None
    if not os.path.isdir(folder):
        raise ModelFormatError(f"{folder}: not a folder; expected the second stage's folder (or none)")
    regular_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read the second stage ({e.strerror})") from None
    except ValueError as e:
        raise ModelFormatError(f"{path}: not JSON ({e})") from None
    _check(data, path, folder)
    return SecondStage(folder, data["languages"], data.get("chosen_on", ""), fingerprint,
                       features=FEATURES_OF[data["format_version"]], embeddings=embeddings, unk_id=unk_id)


def _check(data, path: str, folder: str) -> None:
    if not isinstance(data, dict) or not is_version(data.get("format_version"), READS):
        found = data.get("format_version") if isinstance(data, dict) else None
        raise ModelFormatError(f"{path}: second stage format_version {found!r}; this bitextmine reads "
                               f"{' and '.join(map(str, READS))}")
    features = FEATURES_OF[data["format_version"]]
    if data.get("features") != list(features):
        raise ModelFormatError(f"{path}: features {data.get('features')!r}; expected {list(features)}")
    langs = data.get("languages")
    if not isinstance(langs, dict):
        raise ModelFormatError(f"{path}: no \"languages\" object")
    for lang, c in langs.items():
        _check_language(lang, c, path, folder, features)


def _check_language(lang: str, c, path: str, folder: str, features: tuple) -> None:
    n_features = len(features)
    if not isinstance(c, dict) or kind(c) not in CLASSIFIERS:
        raise ModelFormatError(f"{path}: language {lang!r}: expected an object with \"classifier\" one of "
                               f"{', '.join(CLASSIFIERS)}")
    logistic = kind(c) == "logistic"
    numbers = NUMBERS + (LOGISTIC if logistic else ())
    ok = all(is_finite_number(c.get(k)) for k in numbers) and (not logistic or all(
        isinstance(c.get(k), list) and len(c[k]) == n_features and all(is_finite_number(v) for v in c[k])
        for k in VECTORS))
    if not ok:
        vectors = f" and {n_features} numbers each for {', '.join(VECTORS)}" if logistic else ""
        raise ModelFormatError(f"{path}: language {lang!r}: expected finite numbers {', '.join(numbers)}{vectors}")
    ranges = [("min_prob", 0 <= c["min_prob"] <= 1, "from 0 to 1"), ("prior", 0 < c["prior"] < 1, "between 0 and 1"),
              ("max_lines", isinstance(c["max_lines"], int) and c["max_lines"] >= 1, "a whole number from 1")]
    bad = next(((k, want) for k, ok, want in ranges if not ok), None)
    if bad:
        raise ModelFormatError(f"{path}: language {lang!r}: {bad[0]} {c[bad[0]]!r}; expected {bad[1]}")
    files = [table_file(a, b) for a, b in (("en", lang), (lang, "en"))] + ([] if logistic else [trees_file(lang)])
    files += [expected_file(lang)] if DEFICIT[0] in features else []
    for name in files:
        if not os.path.isfile(os.path.join(folder, name)):
            raise ModelFormatError(f"{os.path.join(folder, name)}: missing; the second stage of {lang!r} needs it")


def save_second_stage(model_dir: str, languages: dict, tables: dict, chosen_on: str = "", compact: bool = False,
                      expected: dict | None = None) -> str:
    """Write a second stage into ``model_dir``: ``languages`` {code: {"classifier": fit_trees's or fit_logistic's dict,
    "min_prob", "floor", "prior", "max_lines", "trained_on"}}, ``tables`` {code: (t(code|en), t(en|code))} (LexicalTable; a code
    absent keeps the tables already there; ``compact``: stored compact, :func:`bitextmine.lexicon.save_table`),
    ``expected`` {code: (fx, en)} each side's usual log best links float32 (V,) under those tables (a code absent
    keeps the file already there). Returns the folder."""
    from ..lexicon import save_table

    folder = os.path.join(model_dir, FOLDER)
    os.makedirs(folder, exist_ok=True)
    for lang, (fwd, bwd) in tables.items():
        save_table(fwd, os.path.join(folder, table_file("en", lang)), compact, languages=("en", lang))
        save_table(bwd, os.path.join(folder, table_file(lang, "en")), compact, languages=(lang, "en"))
    for lang, (fx, en) in (expected or {}).items():
        _save_arrays({"fx": np.asarray(fx, np.float32), "en": np.asarray(en, np.float32), "language": np.array(lang)},
                     os.path.join(folder, expected_file(lang)))
    out = {"format_version": FORMAT_VERSION, "features": list(FEATURES), "chosen_on": chosen_on, "languages": {}}
    for lang, c in sorted(languages.items()):
        clf = c["classifier"]
        entry = {"min_prob": float(c["min_prob"]), "floor": float(c["floor"]), "prior": float(c["prior"]),
                 "max_lines": int(c["max_lines"]), "trained_on": c.get("trained_on", "")}
        if "roots" in clf:  # trees (bitextmine.judge.trees)
            _save_arrays({**clf, "language": np.array(lang)}, os.path.join(folder, trees_file(lang)))
            entry["classifier"] = "trees"
        else:
            entry.update({k: [float(v) for v in clf[k]] for k in VECTORS}, b=float(clf["b"]), classifier="logistic")
        out["languages"][lang] = entry
    tmp = os.path.join(folder, FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(folder, FILE))
    return folder


def _load_arrays(path: str, what: str) -> dict:
    """{name: array} of the npz file ``path`` (``what`` it holds, for the error); ModelFormatError if unreadable."""
    import zipfile

    regular_file(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # truncated, empty or not an npz file
        raise ModelFormatError(f"{path}: cannot read the second stage's {what} ({e or type(e).__name__})") from None


def _save_arrays(arrays: dict, path: str) -> None:
    """``arrays`` {name: array} into the npz file ``path``, atomically."""
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
