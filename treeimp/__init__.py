"""treeimp: out-of-sample feature importance for tree ensembles."""

from .api import explain
from .ensemble import Objective, Tree, TreeEnsemble
from .permutation import permutation_importance
from .result import Importances

__all__ = ["Importances", "Objective", "Tree", "TreeEnsemble", "explain", "permutation_importance"]
__version__ = "0.1.0"
