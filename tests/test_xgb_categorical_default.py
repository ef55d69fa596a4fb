"""XGBoost >= 3.3 enables categorical support by default: a pandas frame with category
columns trains categorical splits without ``enable_categorical=True``. treeimp must
predict, attribute and explain such a model on the same frame as XGBoost does (truths:
the booster's ``output_margin`` and ``pred_contribs`` on the frame)."""

import numpy as np
import pandas as pd
import pytest

import treeimp

xgb = pytest.importorskip("xgboost")
pytestmark = pytest.mark.skipif(
    tuple(int(v) for v in xgb.__version__.split(".")[:2]) < (3, 3),
    reason=f"categorical data needs enable_categorical=True before XGBoost 3.3 "
    f"(installed {xgb.__version__})")


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"num": rng.normal(size=n),
                       "letter": pd.Categorical(rng.choice(list("abcdefgh"), n)),
                       "size": pd.Categorical(rng.choice([3, 7, 11], n)),
                       "noise": rng.normal(size=n)})
    df.loc[rng.random(n) < 0.05, "letter"] = np.nan
    f = (2.0 * df["letter"].isin(["a", "c", "f"]).to_numpy() + 0.5 * df["num"].to_numpy()
         + 0.3 * (df["size"] == 7).to_numpy())
    return df, f, rng


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_default_settings_categorical_frame(kind):
    df, f, rng = _frame()
    if kind == "regressor":
        model = xgb.XGBRegressor(n_estimators=10, max_depth=3, random_state=0)
        y = f + 0.3 * rng.normal(size=len(f))
    else:
        model = xgb.XGBClassifier(n_estimators=10, max_depth=3, random_state=0)
        y = (f + rng.logistic(size=len(f)) > 1.0).astype(int)
    model.fit(df[:300], y[:300])
    test, yt = df[300:], y[300:]
    ens = treeimp.parse(model)
    assert ens.is_categorical.sum() > 0  # categorical splits without enable_categorical
    dm = xgb.DMatrix(test, enable_categorical=True)
    booster = model.get_booster()
    want = booster.predict(dm, output_margin=True).reshape(len(test), -1)
    np.testing.assert_allclose(ens.predict_raw(test), want, rtol=1e-6, atol=1e-6)
    got = treeimp.contributions(model, test)
    contribs = booster.predict(dm, pred_contribs=True)
    np.testing.assert_allclose(got.values, contribs[:, :-1], rtol=1e-5, atol=1e-5)
    res = treeimp.explain(model, test, yt, methods=("mdi_oob", "ufi"), random_state=0)
    for method in ("mdi_oob", "ufi"):
        assert np.isfinite(res.table[method]).all()
        assert res.ranking(method)[0] == "letter"
