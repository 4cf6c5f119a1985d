"""Mining translation pairs: margin scores, retrieval modes and 1:1 selection, mining two files."""

from .margin import margin_scores
from .mine import Pairs, greedy_one_to_one, mine_embeddings, mine_files

__all__ = ["Pairs", "greedy_one_to_one", "margin_scores", "mine_embeddings", "mine_files"]
