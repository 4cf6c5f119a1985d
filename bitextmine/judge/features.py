"""What the second stage knows of a candidate pair (foreign line i, English line j).

  margin     the margin score mine gives the pair (ratio margin, k neighbours)
  cosine     the cosine of the two embeddings
  z          the standout z (:mod:`bitextmine.mining.standout`)
  length     |log(pieces of i / pieces of j)|
  ibm_fx     IBM model 1: the foreign line's log-likelihood given the English one, per piece
  ibm_en     the English line's given the foreign one
  llr_fx     ibm_fx minus the foreign line's log-likelihood given no English (NULL alone, per piece): how
  llr_en     much the other line explains beyond how common its pieces are; raw IBM1 rewards sentences
             of common pieces, this ratio does not. (Normalising by the scores of each line's k nearest
             candidates instead, as the margin does, measured no better on the sparse dev tasks and costs
             2k + 1 scorings a pair: docs/tried.md.)
  cover_fx   the share of the foreign line's pieces whose best link to an English piece (max t(f|e)) reaches
  strong_fx  0.05, and 0.2, and the mean log of those best links (:func:`bitextmine.lexicon.best_links`): a
  best_fx    same-topic sentence explains its topic's pieces and leaves the rest unexplained
  cover_en, strong_en, best_en   the same of the English line's pieces
  numbers_shared ... chars       what the two texts share on their surface (:mod:`.surface`)
  align_fx ... worst_en          how well each line's pieces find a counterpart among the other's in the model's
                                 own space (:mod:`.interaction`); a stage of format 3 or before has none of them
  deficit_fx   how far the foreign line's pieces fall below how well translations usually explain each of them
  peak_fx      (sum, largest, and how many fall far: :func:`bitextmine.lexicon.deficits`, against each piece's usual
  misses_fx    best link, :func:`bitextmine.lexicon.expected_links`): a negation, a pronoun, a number or a name
  deficit_en, peak_en, misses_en   left unexplained, where the pieces translations seldom explain count for
                                 nothing; the same of the English line's pieces. A stage of format 4 or before
                                 has none of them

Sides are oriented foreign / English whatever the order of mining, so one classifier per language serves
both orders. Only the candidate pairs are scored: the cost grows with the lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lexicon import score, score_and_links
from .interaction import INTERACTION, interaction_features
from .surface import SURFACE, surface_features

BASE = ("margin", "cosine", "z", "length", "ibm_fx", "ibm_en", "llr_fx", "llr_en",
        "cover_fx", "strong_fx", "best_fx", "cover_en", "strong_en", "best_en") + SURFACE  # second stage format <= 3
DEFICIT = ("deficit_fx", "peak_fx", "misses_fx", "deficit_en", "peak_en", "misses_en")
FEATURES = BASE + INTERACTION + DEFICIT  # second stage format 5 (format 4: BASE + INTERACTION)
LINK_THRESHOLDS = (0.05, 0.2)  # cover_*, strong_*
# what the stage reads of a line: a sentence is far shorter; a line of megabytes (a whole file on one line) cost
# gigabytes in the piece-by-piece features (a 10 MB line: 6 GB), and is no sentence to judge
JUDGE_MAX_CHARS = 4096
JUDGE_MAX_PIECES = 1024


@dataclass(frozen=True)
class Pieces:
    """Some rows of one side: ``rows`` int64 (r,) ascending and distinct, their pieces in the flat layout
    ``ids`` int64 (total,), ``offsets`` int64 (r,) (:mod:`bitextmine.tokenizer`), and their ``texts`` (r
    strings, in the order of ``rows``)."""

    rows: np.ndarray
    ids: np.ndarray
    offsets: np.ndarray
    texts: tuple

    @classmethod
    def of(cls, rows: np.ndarray, texts, tokenizer, pieces: tuple | None = None) -> "Pieces":
        """Tokenise ``texts`` (one per row of ``rows``, ascending distinct int), unless their ``pieces`` (ids,
        offsets) are given; each text cut to JUDGE_MAX_CHARS characters and its pieces to JUDGE_MAX_PIECES (a
        sentence has far fewer, so its features are as without the cut)."""
        texts = tuple(t[:JUDGE_MAX_CHARS] for t in texts)
        ids, offsets = pieces if pieces is not None else tokenizer.encode(list(texts))
        ids, offsets = first_pieces(np.asarray(ids, np.int64), np.asarray(offsets, np.int64), JUDGE_MAX_PIECES)
        return cls(np.asarray(rows, np.int64), ids, offsets, texts)

    def text(self, wanted: np.ndarray) -> list[str]:
        """The texts of rows ``wanted`` int (q,) (each one of ``rows``), in that order."""
        return [self.texts[k] for k in np.searchsorted(self.rows, np.asarray(wanted, np.int64)).tolist()]

    def take(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pieces of rows ``wanted`` int (q,) (each one of ``rows``) in the flat layout, in that order."""
        at = np.searchsorted(self.rows, np.asarray(wanted, np.int64))
        lengths = np.diff(self.offsets, append=len(self.ids))[at]
        ends = np.cumsum(lengths)
        starts = np.repeat(self.offsets[at] - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)
        return self.ids[starts], ends - lengths

    def lengths(self, wanted: np.ndarray) -> np.ndarray:
        """Pieces per row of ``wanted`` int64 (q,)."""
        at = np.searchsorted(self.rows, np.asarray(wanted, np.int64))
        return np.diff(self.offsets, append=len(self.ids))[at]


def first_pieces(ids: np.ndarray, offsets: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """The flat layout (ids int64 (total,), offsets int64 (r,)) with each row's pieces cut to its first ``most``."""
    lengths = np.diff(offsets, append=len(ids))
    if len(lengths) == 0 or lengths.max() <= most:
        return ids, offsets
    keep = np.minimum(lengths, most)
    pos = np.arange(len(ids)) - np.repeat(offsets, lengths)  # each piece's place in its row
    return ids[pos < np.repeat(keep, lengths)], np.concatenate([[0], np.cumsum(keep)[:-1]]).astype(np.int64)


def lexical(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """IBM1 scores float64 (q, 2) of the pairs (fx row i, en row j), i, j int (q,): t(foreign|English) then
    t(English|foreign); ``tables`` (the table trained English -> foreign, the one trained foreign -> English)."""
    e, f = en.take(j), fx.take(i)
    return np.stack([score(tables[0], e, f), score(tables[1], f, e)], axis=1).astype(np.float64)


def background(table, side: Pieces, rows: np.ndarray) -> np.ndarray:
    """Each row's log-likelihood per piece given no source sentence (NULL alone) under ``table``: float64 (r,)."""
    pieces = side.take(rows)
    empty = (np.zeros(0, np.int64), np.zeros(len(rows), np.int64))
    return score(table, empty, pieces).astype(np.float64)


def lexical_features(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(ibm_fx, ibm_en, llr_fx, llr_en) float64 (c, 4) of the candidates (foreign row i, English row j) int (c,)."""
    return _with_background(tables, fx, en, i, j, lexical(tables, fx, en, i, j))


def _with_background(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray, own: np.ndarray):
    """own float64 (c, 2) (:func:`lexical`) followed by own minus each line's :func:`background`: (c, 4)."""
    ui, ii = np.unique(i, return_inverse=True)
    uj, jj = np.unique(j, return_inverse=True)
    base = np.c_[background(tables[0], fx, ui)[ii.reshape(-1)], background(tables[1], en, uj)[jj.reshape(-1)]]
    return np.c_[own, own - base]


def ibm1_features(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray, f: tuple,
                  e: tuple, expected: tuple | None = None) -> np.ndarray:
    """(:func:`lexical_features`, then cover_fx, strong_fx, best_fx, cover_en, strong_en, best_en) float64 (c, 10)
    of the candidates (foreign row i, English row j) int (c,), whose pieces f = fx.take(i) and e = en.take(j) the
    caller has taken (:func:`pair_features` takes them once for these and the interaction): one look-up of each
    pair's pieces a direction (:func:`bitextmine.lexicon.score_and_links`). With ``expected`` (each foreign piece's
    usual log best link float (V,), each English piece's), the :data:`DEFICIT` follow: (c, 16)."""
    ex = expected if expected is not None else (None, None)
    ibm_fx, links_fx = score_and_links(tables[0], e, f, LINK_THRESHOLDS, expected=ex[0])
    ibm_en, links_en = score_and_links(tables[1], f, e, LINK_THRESHOLDS, expected=ex[1])
    own = np.stack([ibm_fx, ibm_en], axis=1).astype(np.float64)
    k = len(LINK_THRESHOLDS) + 1
    return np.c_[_with_background(tables, fx, en, i, j, own), links_fx[:, :k], links_en[:, :k], links_fx[:, k:],
                 links_en[:, k:]]


def pair_features(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray, margin: np.ndarray,
                  cosine: np.ndarray, z: np.ndarray, vectors: np.ndarray | None = None,
                  expected: tuple | None = None) -> np.ndarray:
    """The :data:`FEATURES` float64 (c, 32) of the candidates (foreign row i, English row j) int (c,) with their
    margin, cosine and z float (c,), ``vectors`` the model's unit piece vectors float32 (V, d)
    (:func:`bitextmine.judge.interaction.unit_rows`) and ``expected`` each side's usual log best links
    (:func:`ibm1_features`); without ``expected`` the first 26; without either the :data:`BASE` features (c, 20)."""
    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    f, e = fx.take(i), en.take(j)
    length = np.abs(np.log(np.maximum(fx.lengths(i), 1) / np.maximum(en.lengths(j), 1)))
    lex = ibm1_features(tables, fx, en, i, j, f, e, expected)
    base = np.c_[np.asarray(margin, np.float64), np.asarray(cosine, np.float64), np.asarray(z, np.float64),
                 length, lex[:, :10], surface_features(fx.text(i), en.text(j))]
    if vectors is None:
        return base
    return np.c_[base, interaction_features(vectors, f, e), lex[:, 10:]]
