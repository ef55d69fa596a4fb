"""treeimp: out-of-sample feature importance for tree ensembles."""

from .ensemble import Objective, Tree, TreeEnsemble

__all__ = ["Objective", "Tree", "TreeEnsemble"]
__version__ = "0.1.0"
