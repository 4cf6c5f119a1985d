"""What the second stage knows of a candidate pair (foreign line i, English line j).

  margin     the margin score mine gives the pair (ratio margin, k neighbours)
  cosine     the cosine of the two embeddings
  z          the standout z (:mod:`bitextmine.mining.standout`)
  length     |log(pieces of i / pieces of j)|
  ibm_fx     IBM model 1: the foreign line's log-likelihood given the English one, per piece
  ibm_en     the English line's given the foreign one
  norm_fx    ibm_fx minus the mean of the same score over i's k nearest English lines and j's k nearest
  norm_en    foreign lines (half each), as the margin normalises the cosine: raw IBM1 rewards sentences
             of common pieces, its neighbourhood-normalised form does not

Sides are oriented foreign / English whatever the order of mining, so one classifier per language serves
both orders. Only candidate pairs and their neighbours are scored: the cost grows with the lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lexicon import score

FEATURES = ("margin", "cosine", "z", "length", "ibm_fx", "ibm_en", "norm_fx", "norm_en")


@dataclass(frozen=True)
class Pieces:
    """The piece ids of some rows of one side: ``rows`` int64 (r,) ascending and distinct, their pieces in the
    flat layout ``ids`` int64 (total,), ``offsets`` int64 (r,) (:mod:`bitextmine.tokenizer`)."""

    rows: np.ndarray
    ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray, texts, tokenizer) -> "Pieces":
        """Tokenise ``texts`` (one per row of ``rows``, ascending distinct int)."""
        ids, offsets = tokenizer.encode(list(texts))
        return cls(np.asarray(rows, np.int64), np.asarray(ids, np.int64), np.asarray(offsets, np.int64))

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


def lexical(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """IBM1 scores float64 (q, 2) of the pairs (fx row i, en row j), i, j int (q,): t(foreign|English) then
    t(English|foreign); ``tables`` (the table trained English -> foreign, the one trained foreign -> English)."""
    e, f = en.take(j), fx.take(i)
    return np.stack([score(tables[0], e, f), score(tables[1], f, e)], axis=1).astype(np.float64)


def lexical_features(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray, nn_fx: np.ndarray,
                     nn_en: np.ndarray) -> np.ndarray:
    """(ibm_fx, ibm_en, norm_fx, norm_en) float64 (c, 4) of the candidates (i, j) int (c,); ``nn_fx`` int
    (c, k): i's k nearest English rows, ``nn_en`` int (c, k'): j's k' nearest foreign rows (-1: none). Each
    distinct pair is scored once."""
    c = len(i)
    ii = np.concatenate([i, np.repeat(i, nn_fx.shape[1]), nn_en.ravel()])
    jj = np.concatenate([j, nn_fx.ravel(), np.repeat(j, nn_en.shape[1])])
    ok = (ii >= 0) & (jj >= 0)
    key = ii[ok] * (int(jj.max(initial=0)) + 1) + jj[ok]
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    scores = np.zeros((len(ii), 2))
    scores[ok] = lexical(tables, fx, en, ii[ok][first], jj[ok][first])[inverse.reshape(-1)]
    own = scores[:c]
    a = scores[c : c + nn_fx.size].reshape(c, nn_fx.shape[1], 2)
    b = scores[c + nn_fx.size :].reshape(c, nn_en.shape[1], 2)
    norm = own - (_mean(a, nn_fx >= 0) + _mean(b, nn_en >= 0)) / 2
    return np.c_[own, norm]


def _mean(s: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Mean over axis 1 of s (c, k, 2) where ok (c, k); 0 where none."""
    return (s * ok[..., None]).sum(1) / np.maximum(ok.sum(1), 1)[:, None]


def pair_features(tables: tuple, fx: Pieces, en: Pieces, i: np.ndarray, j: np.ndarray, nn_fx: np.ndarray,
                  nn_en: np.ndarray, margin: np.ndarray, cosine: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The :data:`FEATURES` float64 (c, 8) of the candidates (foreign row i, English row j) int (c,) with their
    margin, cosine and z float (c,); ``nn_fx``, ``nn_en`` as :func:`lexical_features` takes them."""
    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    length = np.abs(np.log(np.maximum(fx.lengths(i), 1) / np.maximum(en.lengths(j), 1)))
    lex = lexical_features(tables, fx, en, i, j, np.asarray(nn_fx, np.int64), np.asarray(nn_en, np.int64))
    return np.c_[np.asarray(margin, np.float64), np.asarray(cosine, np.float64), np.asarray(z, np.float64),
                 length, lex]
