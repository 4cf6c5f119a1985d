"""Lexical translation models learned from the bitext: IBM model 1 tables over token ids (:mod:`.ibm1`)."""

from .ibm1 import (LexicalTable, best_links, deficits, expected_links, load_table, prune, save_table, score,
                   score_and_links, score_both, token_links, train_ibm1, vocabulary_fingerprint)

__all__ = ["LexicalTable", "best_links", "deficits", "expected_links", "load_table", "prune", "save_table", "score",
           "score_and_links", "score_both", "token_links", "train_ibm1", "vocabulary_fingerprint"]
