"""treeimp: out-of-sample feature importance for tree ensembles."""

from .api import explain
from .contributions import Contributions, contributions
from .crossfit import cross_explain
from .ensemble import Objective, Tree, TreeEnsemble
from .explainer import Explainer
from .parsers import parse
from .parsers.files import load
from .permutation import permutation_importance
from .result import Importances
from .selector import ImportanceSelector
from .stats import NodeStats

__all__ = ["Contributions", "Explainer", "ImportanceSelector", "Importances", "NodeStats",
           "Objective", "Tree", "TreeEnsemble", "contributions", "cross_explain", "explain",
           "load", "parse", "permutation_importance"]
__version__ = "0.1.0"
