"""What explain returns: Importances, its finalisation (standard errors, p-values)
and plots."""
