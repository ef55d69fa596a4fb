"""treeimp: out-of-sample feature importance for tree ensembles."""

from .api import explain
from .ensemble import Objective, Tree, TreeEnsemble
from .permutation import permutation_importance
from .result import Importances
from .selector import ImportanceSelector

__all__ = ["ImportanceSelector", "Importances", "Objective", "Tree", "TreeEnsemble", "explain",
           "permutation_importance"]
__version__ = "0.1.0"
