"""Mining translation pairs: margin scores, retrieval modes and 1:1 selection, mining embeddings.

Mining two files runs in stages: :func:`bitextmine.pipeline.mine_files` (also importable from here).
"""

from .margin import margin_scores
from .mine import Pairs, mine_embeddings
from .select import greedy_one_to_one

__all__ = ["Pairs", "greedy_one_to_one", "margin_scores", "mine_embeddings", "mine_files"]


def __getattr__(name: str):
    # the staged run builds on this package, so it is imported when asked for, not at import time
    if name == "mine_files":
        from ..pipeline import mine_files

        return mine_files
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
