"""The second stage of mining: a judgement of the candidate pairs only (the k nearest neighbours of each
side), telling a translation from a same-topic sentence. Features of a pair (:mod:`.features`: margin,
cosine, standout z, length ratio, IBM model 1 both ways, raw and against the pieces' background, the texts'
surface (:mod:`.surface`) and how well each line's pieces find a counterpart among the other's in the model's
space (:mod:`.interaction`)) combined by gradient-boosted trees (:mod:`.trees`; or a logistic regression,
:mod:`.logistic`) into a probability of translation, per language paired with English; the classifier and its
lexical tables live in the model directory (:mod:`.store`), made by :mod:`.train`.
"""

from .store import SecondStage, load_second_stage, save_second_stage

__all__ = ["SecondStage", "load_second_stage", "save_second_stage"]
