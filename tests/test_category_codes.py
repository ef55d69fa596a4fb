"""'category' columns: the rows' codes are read only where a label needs them (unseen
labels, labels that are not numbers), with the same warnings and errors as before."""

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.ensemble import RandomForestRegressor

import treeimp


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = X[:, 0] + (X[:, 1] > 0)
    return X, y


def test_non_numeric_label_in_use_is_refused_and_unused_is_not():
    """A numeric feature read from a 'category' column: a label that is not a number is
    an error where a row holds it, and ignored where no row does."""
    X, y = _data()
    model = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    codes = (X[:, 1] > 0).astype(np.int8)
    frame = pd.DataFrame({"x0": X[:, 0], "x1": pd.Categorical.from_codes(
        codes, categories=[0.0, 1.0, "a"]), "x2": X[:, 2]})
    ok = treeimp.explain(model, frame, y, random_state=0)
    # the same as the column's values read as numbers (the unused label plays no part)
    ref = treeimp.explain(model, np.c_[X[:, 0], codes.astype(np.float32), X[:, 2]], y,
                          random_state=0)
    np.testing.assert_array_equal(ok.table.to_numpy(), ref.table.to_numpy())
    bad = frame.copy()
    bad["x1"] = pd.Categorical.from_codes(np.where(np.arange(len(y)) == 7, 2, codes),
                                          categories=[0.0, 1.0, "a"])
    with pytest.raises(ValueError, match="'category' column with the label 'a'"):
        treeimp.explain(model, bad, y, random_state=0)


def test_unseen_category_labels_are_counted_in_the_warning():
    X, y = _data()
    codes = (np.abs(X[:, 1]) * 3).astype(np.int8) % 3
    train = pd.DataFrame({"x0": X[:, 0], "x1": pd.Categorical.from_codes(
        codes, categories=["p", "q", "r"]), "x2": X[:, 2]})
    model = xgb.XGBRegressor(n_estimators=5, max_depth=3, enable_categorical=True,
                             tree_method="hist").fit(train, y)
    new = train.copy()
    held = np.where(np.arange(len(y)) % 50 == 0, 3, codes)  # 8 rows of an unseen label
    new["x1"] = pd.Categorical.from_codes(held, categories=["p", "q", "r", "s"])
    with pytest.warns(UserWarning, match=r"8 rows have labels the model never saw \(\['s'\]"):
        treeimp.explain(model, new, y, random_state=0)
    # labels all seen (an unused extra category): no warning
    quiet = train.copy()
    quiet["x1"] = pd.Categorical.from_codes(codes, categories=["p", "q", "r", "s"])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        treeimp.explain(model, quiet, y, random_state=0)
