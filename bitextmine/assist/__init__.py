"""An assisting encoder: a stronger multilingual sentence encoder whose cosine of each candidate pair joins the
second stage's score (``mine --assist``). The fast model still finds the candidates; the assist encodes only the
lines of the pairs the second stage judges, or, where it picks each line's candidate among the fast model's
neighbours (``--assist-pick``, :mod:`.pick`), the lines that have neighbours."""

from .encoders import AssistEncoder, assist_for, choose_assist, load_assist, precomputed_assist, resolve_assist
from .joined import JOINED, AssistedJudge, join_aligned, joined_score, standout

__all__ = ["AssistEncoder", "AssistedJudge", "JOINED", "assist_for", "choose_assist", "join_aligned", "joined_score", "load_assist", "standout", "resolve_assist"]
