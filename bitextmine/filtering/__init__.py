"""Filtering noisy parallel data: the rules and their reasons, language checks, the chunked pipeline."""

from .pipeline import FilterStats, filter_tsv, write_stats

__all__ = ["FilterStats", "filter_tsv", "write_stats"]
