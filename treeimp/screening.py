"""The default screening measure per model kind (ImportanceSelector, Importances.select,
the command line): the measure benchmarks/screening.py found most powerful at a held
false discovery rate (numbers and designs in benchmarks/README.md)."""

from __future__ import annotations

from .ensemble import BOOSTING, FOREST

DEFAULT_SCREENING = {
    FOREST: "mdi_oob_centered",
    # not ufi, although ufi alone held FDR <= 0.05 on every design of the study (boosting
    # mdi_oob_centered: 0.12-0.13 on Friedman #1, heavy-tailed z of rarely used noise
    # features): on overconfident classifiers (e.g. XGBClassifier's defaults) its Newton
    # pseudo-response -g/h is unbounded and its standard errors swamp every feature
    BOOSTING: "mdi_oob_centered",
}


def default_screening_method(kind):
    """The default screening measure for a model of ``kind`` ("forest" or "boosting")."""
    if kind not in DEFAULT_SCREENING:
        raise ValueError(f"kind must be one of {sorted(DEFAULT_SCREENING)}, got {kind!r}")
    return DEFAULT_SCREENING[kind]

