"""Mining corpora of any size in stages through a work directory, in this process or on a Ray cluster.

plan (line-exact chunks) -> dedup (distinct lines, every line number kept) -> encode (per chunk) ->
k-NN (a grid of source x target chunk cells, top-k merged with ties to the lower row) -> margins (global
neighbour means; each row's best candidate above the threshold) -> selection (every floor, the standout
from each side's moments, then the retrieval mode: :func:`bitextmine.mining.select.finish`) -> output (texts and
line numbers fetched per chunk).

Each stage writes its files under temporary names and renames them; a file that exists and loads is not
computed again, so a stopped run continues with ``resume``. Modules: workdir (layout, atomic writes,
resume checks), plan, dedup, stages (encode, knn, reduce, margins, moments, texts), engine (local, Ray), run (the
driver: :func:`mine_files`).
"""

from .run import MineStats, mine_files

__all__ = ["MineStats", "mine_files"]
