"""Which columns LightGBM's ``pandas_categorical`` category lists belong to."""

from __future__ import annotations


def _categorical_features(infos, params):
    """Indices of the categorical features: feature_infos written as code lists
    (``-1:0:3``), plus the parameters' ``categorical_feature`` indices."""
    cats = {j for j, info in enumerate(infos) if info != "none" and not info.startswith("[")}
    listed = (params or {}).get("categorical_feature", "")
    for tok in listed.replace(",", " ").split():
        if tok.lstrip("-").isdigit() and 0 <= int(tok) < len(infos):
            cats.add(int(tok))
    return sorted(cats)


def _max_code(info):
    """Largest non-negative code a feature's training values show (-1: none), or None
    when the feature cannot hold pandas codes (non-integer or negative range)."""
    if info == "none":
        return -1
    if info.startswith("["):
        try:
            lo, hi = (float(v) for v in info[1:-1].split(":"))
        except ValueError:
            return None
        ok = 0 <= lo <= hi < 2.0**31 and lo == int(lo) and hi == int(hi)
        return int(hi) if ok else None
    codes = [int(c) for c in info.split(":") if c.lstrip("-").isdigit()]
    return max([c for c in codes if c >= 0], default=-1)


def feature_categories(pandas_categorical, infos, params):
    """Per feature the pandas category labels LightGBM maps DataFrame columns with.

    ``pandas_categorical`` holds one list per pandas 'category' column, in column order,
    but the text does not say which columns those were. When there are as many lists as
    categorical features they are mapped onto those in order. Otherwise (an ordered
    categorical is a numeric feature of codes; an explicit ``categorical_feature`` may
    list other columns) each list goes to every column it can belong to in some
    order-preserving placement that covers the categorical features and fits the codes
    the column shows (a numeric column listed here but numeric in the evaluation frame
    ignores its labels). A column two lists could belong to is an error.
    """
    if not pandas_categorical:
        return None
    cats = _categorical_features(infos, params)
    lists = pandas_categorical
    if len(lists) == len(cats):
        pairs = list(zip(cats, range(len(lists)), strict=True))
    else:
        pairs = _match_columns(lists, infos, set(cats))
    out = [None] * len(infos)
    for j, i in pairs:
        top = _max_code(infos[j])
        if top is None or top >= len(lists[i]):
            raise ValueError(f"LightGBM pandas_categorical list of {len(lists[i])} labels "
                             f"cannot describe feature {j} (feature_infos {infos[j][:40]!r})")
        out[j] = list(lists[i])
    return out


def _match_columns(lists, infos, cats):
    """(column, list index) pairs: list i may sit on column j in some placement of the
    lists, in order, on distinct columns that covers ``cats`` (when there are enough
    lists) and where every list is long enough for the codes its column shows."""
    m, n = len(lists), len(infos)
    tops = [_max_code(info) for info in infos]
    fits = [[tops[j] is not None and tops[j] < len(lists[i]) for j in range(n)]
            for i in range(m)]
    must = [j in cats and m >= len(cats) for j in range(n)]
    # back[i][j]: lists i.. fit on columns j..; fwd[i][j]: lists ..i-1 fit on columns ..j-1
    back = [[False] * (n + 1) for _ in range(m + 1)]
    fwd = [[False] * (n + 1) for _ in range(m + 1)]
    for j in range(n, -1, -1):
        back[m][j] = not any(must[j:])
        for i in range(m - 1, -1, -1):
            if j < n:
                back[i][j] = ((not must[j] and back[i][j + 1])
                              or (fits[i][j] and back[i + 1][j + 1]))
    for j in range(n + 1):
        fwd[0][j] = not any(must[:j])
        for i in range(1, m + 1):
            if j > 0:
                fwd[i][j] = ((not must[j - 1] and fwd[i][j - 1])
                             or (fits[i - 1][j - 1] and fwd[i - 1][j - 1]))
    if not back[0][0]:
        raise ValueError(f"LightGBM model stores {m} pandas category lists that cannot be "
                         f"placed on its {n} features (categorical features {sorted(cats)})")
    pairs = []
    for j in range(n):
        options = [i for i in range(m) if fits[i][j] and fwd[i][j] and back[i + 1][j + 1]]
        if len(options) > 1:
            raise ValueError(f"LightGBM model stores {m} pandas category lists for "
                             f"{len(cats)} categorical features; feature {j} could hold "
                             f"lists {options}, so its category labels are ambiguous")
        pairs += [(j, i) for i in options]
    return pairs
