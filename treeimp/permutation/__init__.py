"""Permutation importance on the compiled normal form."""
