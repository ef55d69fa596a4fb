"""treeimp: out-of-sample feature importance for tree ensembles."""

from .api import contributions, explain, permutation_importance
from .attributions.contributions import Contributions
from .crossfit import cross_explain
from .explainer import Explainer
from .model.ensemble import Objective, Tree, TreeEnsemble
from .parsers import parse
from .parsers.files import load
from .results.importances import Importances
from .selector import ImportanceSelector
from .stats.node_stats import NodeStats

__all__ = ["Contributions", "Explainer", "ImportanceSelector", "Importances", "NodeStats",
           "Objective", "Tree", "TreeEnsemble", "contributions", "cross_explain", "explain",
           "load", "parse", "permutation_importance"]
__version__ = "0.1.0"
