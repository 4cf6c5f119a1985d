"""Nearest-neighbour search by inner product: one blockwise top-k, exact search of both directions in
one pass, and FAISS indexes (flat, IVF, IVF-PQ) for one direction."""

from .exact import knn_both
from .index import knn, recall_at_k, resolve_index

__all__ = ["knn", "knn_both", "recall_at_k", "resolve_index"]
