"""Evaluation: metrics and benchmark readers, the ``eval`` runners, and threshold calibration."""
