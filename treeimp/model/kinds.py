"""The two kinds of ensemble (``TreeEnsemble.kind``): an averaged (bagged) forest, or a
boosted sum of trees."""

FOREST = "forest"
BOOSTING = "boosting"
