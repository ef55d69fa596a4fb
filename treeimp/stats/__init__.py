"""Node statistics that add up: the accumulation drivers (forest and staged boosting),
row blocks, kept buffers, in-bag checks."""
