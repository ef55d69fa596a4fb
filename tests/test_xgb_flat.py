"""The all-trees-at-once XGBoost reader (``parsers/xgb_flat.py``) against the per-tree
path it replaces for live models: bitwise the same normal form on every kind of model
it takes (categorical splits, DART, num_parallel_tree, multiclass, Poisson), and None
(so the per-tree path reads it) on what it does not take: trees that keep pruned
(unreachable) nodes, vector-leaf trees, damaged bytes."""

import json

import numpy as np
import pandas as pd
import pytest

xgb = pytest.importorskip("xgboost")

import treeimp  # noqa: E402
from treeimp.kernels.ubjson_index import index_values  # noqa: E402
from treeimp.parsers.ubjson import MAX_DEPTH, SKIPPED, read_ubjson  # noqa: E402
from treeimp.parsers.xgb import _config_shrinkage, parse_xgboost_json  # noqa: E402
from treeimp.parsers.xgb_flat import read_model  # noqa: E402


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return rng, X, X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * rng.normal(size=n)


def _categorical_frame(rng, n):
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": pd.Categorical(rng.integers(0, 12, n).astype(str))})
    y = X["a"].to_numpy() + (X["c"].cat.codes.to_numpy() % 3 == 0)
    return X, y


def _models():
    rng, X, y = _data()
    yb = (y > np.median(y)).astype(int)
    yk = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    Xc, yc = _categorical_frame(rng, 400)
    kw = dict(n_estimators=8, max_depth=3, n_jobs=1, random_state=0)
    return {
        "binary": xgb.XGBClassifier(**kw).fit(X, yb),
        "regression": xgb.XGBRegressor(**kw).fit(X, y),
        "multiclass": xgb.XGBClassifier(**kw).fit(X, yk),
        "dart": xgb.XGBRegressor(booster="dart", rate_drop=0.3, **kw).fit(X, y),
        "parallel_trees": xgb.XGBRegressor(num_parallel_tree=3, **kw).fit(X, y),
        "poisson": xgb.XGBRegressor(objective="count:poisson", **kw).fit(X, np.exp(y / 2)),
        "categorical": xgb.XGBRegressor(enable_categorical=True, tree_method="hist",
                                        max_cat_to_onehot=1, **kw).fit(Xc, yc),
        "categorical_onehot": xgb.XGBRegressor(enable_categorical=True, tree_method="hist",
                                               max_cat_to_onehot=64, **kw).fit(Xc, yc),
    }


MODELS = _models()


def _per_tree(model):
    """The per-tree path on the same booster, as parse_xgboost took it before."""
    booster = model.get_booster()
    eta, regularization = _config_shrinkage(json.loads(booster.save_config()),
                                            xgb.__version__)
    return parse_xgboost_json(read_ubjson(bytes(booster.save_raw("ubj"))),
                              learning_rate=eta, regularization=regularization,
                              classes=getattr(model, "classes_", None))


def _assert_same(a, b):
    fields_a, fields_b = vars(a), vars(b)
    assert set(fields_a) == set(fields_b)
    for name, va in fields_a.items():
        vb = fields_b[name]
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and va.shape == vb.shape, name
            assert np.array_equal(va, vb, equal_nan=va.dtype.kind == "f"), name
        elif isinstance(va, list):
            assert len(va) == len(vb), name
            for x, y in zip(va, vb):
                assert (x is None and y is None) or np.array_equal(np.asarray(x),
                                                                   np.asarray(y)), name
        elif name == "objective":
            assert repr(va) == repr(vb) and va.source == vb.source
        else:
            assert va == vb or (va != va and vb != vb), name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_flat_path_equals_per_tree_path(name):
    model = MODELS[name]
    assert read_model(bytes(model.get_booster().save_raw("ubj"))) is not None
    ens = treeimp.parse(model)
    _assert_same(ens, _per_tree(model))
    if name.startswith("categorical"):
        assert ens.is_categorical.any()
    # and the normal form predicts what XGBoost predicts
    X = _categorical_frame(np.random.default_rng(1), 50)[0] if name.startswith(
        "categorical") else _data(50, seed=1)[1]
    dm = xgb.DMatrix(X, enable_categorical=True)
    want = model.get_booster().predict(dm, output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(X).reshape(want.shape), want, rtol=1e-5,
                               atol=1e-5)


def _tree_truth(tree):
    """One tree of XGBoost's JSON document (decoded by Python's json) walked from the
    root by recursion: every node's value (leaves: split_conditions; internal nodes: the
    sum_hessian-weighted mean of their children's, the midpoint when both weigh
    nothing), the post-order (left subtree, right subtree, node) and the leaf depths."""
    left, right = tree["left_children"], tree["right_children"]
    cond = np.asarray(tree["split_conditions"], np.float32).astype(np.float64)
    hess = np.asarray(tree["sum_hessian"], np.float32).astype(np.float64)
    value, order, depths = np.zeros(len(left)), [], []

    def walk(i, d):
        if left[i] < 0:
            value[i] = cond[i]
            depths.append(d)
        else:
            a, b = left[i], right[i]
            walk(a, d + 1)
            walk(b, d + 1)
            w = hess[a] + hess[b]
            value[i] = ((hess[a] * value[a] + hess[b] * value[b]) / w if w > 0
                        else 0.5 * (value[a] + value[b]))
        order.append(i)

    walk(0, 0)
    return value, np.array(order), max(depths), min(depths)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_flat_path_matches_xgboosts_json_document(name):
    """The ensemble the flat path builds (its one structural pass included: normal
    form, post-order, internal values, depths) against XGBoost's own JSON document of
    the booster, read with Python's json and walked tree by tree."""
    booster = MODELS[name].get_booster()
    ens = treeimp.parse(MODELS[name])
    gb = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]
    trees = (gb["model"] if "model" in gb else gb["gbtree"]["model"])["trees"]
    assert ens.n_trees == len(trees)
    for t, tree in enumerate(trees):
        lo, hi = int(ens.tree_offsets[t]), int(ens.tree_offsets[t + 1])
        left = np.array(tree["left_children"])
        assert hi - lo == left.size
        inner = left >= 0
        np.testing.assert_array_equal(ens.left[lo:hi], np.where(inner, left + lo, -1))
        np.testing.assert_array_equal(
            ens.right[lo:hi], np.where(inner, np.array(tree["right_children"]) + lo, -1))
        np.testing.assert_array_equal(ens.feature[lo:hi],
                                      np.where(inner, tree["split_indices"], -1))
        numeric = inner & (np.array(tree["split_type"]) == 0)
        cond = np.asarray(tree["split_conditions"], np.float32).astype(np.float64)
        np.testing.assert_array_equal(ens.threshold[lo:hi][numeric], cond[numeric])
        np.testing.assert_array_equal(ens.missing_left[lo:hi],
                                      inner & np.array(tree["default_left"], bool))
        np.testing.assert_array_equal(
            ens.weight[lo:hi], np.asarray(tree["sum_hessian"], np.float32).astype(float))
        np.testing.assert_array_equal(
            ens.gain[lo:hi][inner],
            np.asarray(tree["loss_changes"], np.float32).astype(float)[inner])
        value, order, deepest, shallowest = _tree_truth(tree)
        np.testing.assert_array_equal(ens.value[lo:hi, 0], value)
        np.testing.assert_array_equal(ens.postorder[lo:hi], order + lo)
        assert tuple(ens.tree_depths[:, t]) == (deepest, shallowest)


def test_document_outside_the_trees_is_the_strict_readers():
    raw = bytes(MODELS["dart"].get_booster().save_raw("ubj"))
    doc, flat = read_model(raw)
    full = read_ubjson(raw)

    def model_and_weights(d):  # weights beside the model (< 3.4) or inside it (3.4)
        b = d["learner"]["gradient_booster"]
        model = b["gbtree"]["model"] if b["name"] == "dart" else b["model"]
        return model, b["weight_drop"] if "weight_drop" in b else model["weight_drop"]

    (gb, weights), (full_gb, full_weights) = model_and_weights(doc), model_and_weights(full)
    assert gb["trees"] is SKIPPED and flat.n_trees == len(full_gb["trees"])
    assert np.array_equal(gb["tree_info"], np.asarray(full_gb["tree_info"]))
    assert np.array_equal(gb["iteration_indptr"], np.asarray(full_gb["iteration_indptr"]))
    assert np.array_equal(weights, full_weights)
    assert doc["learner"]["objective"] == full["learner"]["objective"]


def test_pruned_nodes_go_the_per_tree_way():
    """exact + gamma prunes splits after growing: their nodes stay in the arrays,
    unreachable; the per-tree path drops them (and the parse still equals XGBoost)."""
    _, X, y = _data(400)
    model = xgb.XGBRegressor(n_estimators=6, max_depth=6, tree_method="exact", gamma=2.0,
                             n_jobs=1).fit(X, y)
    booster = model.get_booster()
    doc = json.loads(booster.save_raw("json"))
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    assert any(int(t["tree_param"]["num_deleted"]) > 0 for t in trees)
    assert read_model(bytes(booster.save_raw("ubj"))) is None
    ens = treeimp.parse(model)
    want = booster.predict(xgb.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(X).ravel(), want, rtol=1e-5, atol=1e-5)


def test_vector_leaf_trees_go_the_per_tree_way():
    _, X, y = _data()
    Y = np.column_stack([y, -y])
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2, tree_method="hist",
                             multi_strategy="multi_output_tree", n_jobs=1).fit(X, Y)
    assert read_model(bytes(model.get_booster().save_raw("ubj"))) is None


def test_damaged_bytes_are_left_to_the_strict_reader():
    raw = bytes(MODELS["binary"].get_booster().save_raw("ubj"))
    rng = np.random.default_rng(0)
    for cut in rng.integers(1, len(raw), 40).tolist():
        assert read_model(raw[:cut]) is None  # truncated: never a partial model
    assert read_model(raw + b"x") is None
    assert index_values(np.frombuffer(raw + b"NN", np.uint8), MAX_DEPTH)[0] == 0
    # a length mismatch inside one tree: the per-tree path reports it
    doc = json.loads(MODELS["binary"].get_booster().save_raw("json"))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][3]
    tree["loss_changes"] = tree["loss_changes"][:-1]
    with pytest.raises(ValueError, match="tree 3: 'loss_changes' has"):
        parse_xgboost_json(doc)


@pytest.mark.parametrize("key", [b"default_left", b"split_type"])
def test_flags_other_than_0_1_go_the_per_tree_way(key):
    raw = bytes(MODELS["regression"].get_booster().save_raw("ubj"))
    _, _, elem, start, count, _, key_start, key_len, _ = index_values(
        np.frombuffer(raw, np.uint8), MAX_DEPTH)
    rows = [r for r in range(start.size)
            if raw[key_start[r]:key_start[r] + key_len[r]] == key and count[r] > 0]
    assert rows and elem[rows[0]] in (ord("U"), ord("i"))  # one byte per node
    damaged = bytearray(raw)
    damaged[start[rows[-1]]] = 2
    assert read_model(bytes(damaged)) is None


@pytest.mark.parametrize("key", [b"categories", b"left_children"])
def test_integer_fields_typed_as_floats_go_the_per_tree_way(key):
    """An integer field stored as float32 ('$d' instead of '$l': the same bytes, read as
    tiny non-integer floats) is not truncated into integers by the flat reader: the
    per-tree path reads and reports it."""
    raw = bytes(MODELS["categorical"].get_booster().save_raw("ubj"))
    _, _, elem, start, count, _, key_start, key_len, _ = index_values(
        np.frombuffer(raw, np.uint8), MAX_DEPTH)
    rows = [r for r in range(start.size)
            if raw[key_start[r]:key_start[r] + key_len[r]] == key and count[r] > 0]
    assert rows and all(elem[r] == ord("l") for r in rows)
    damaged = bytearray(raw)
    for r in rows:
        at = raw.rfind(b"$l#", 0, int(start[r]))
        damaged[at + 1] = ord("d")
    assert read_model(bytes(damaged)) is None
    with pytest.raises(ValueError, match="integer"):
        parse_xgboost_json(read_ubjson(bytes(damaged)))


def test_a_wrong_num_nodes_goes_the_per_tree_way():
    """A tree whose tree_param.num_nodes text is not its node count (one digit changed
    in place, in the first, a middle and the last tree) or is not a string: the flat
    reader leaves the model to the per-tree path; the untouched bytes it reads."""
    raw = bytes(MODELS["regression"].get_booster().save_raw("ubj"))
    assert read_model(raw) is not None
    _, marker, _, start, count, _, key_start, key_len, _ = index_values(
        np.frombuffer(raw, np.uint8), MAX_DEPTH)
    rows = [r for r in range(start.size)
            if raw[key_start[r]:key_start[r] + key_len[r]] == b"num_nodes"]
    assert len(rows) == MODELS["regression"].n_estimators
    for r in (rows[0], rows[len(rows) // 2], rows[-1]):
        assert marker[r] == ord("S")
        last = start[r] + count[r] - 1  # the count's last digit, changed
        damaged = bytearray(raw)
        damaged[last] = ord("0") + (raw[last] - ord("0") + 1) % 10
        assert read_model(bytes(damaged)) is None
        damaged = bytearray(raw)
        damaged[start[r]] = ord("x")  # not a number
        assert read_model(bytes(damaged)) is None


def test_index_values_locates_every_value():
    """Every value the strict reader decodes, found by the index at its place: a
    document with every marker, counted and uncounted containers and no-ops."""
    data = (b"{L\x00\x00\x00\x00\x00\x00\x00\x01a[$d#i\x02\x3f\x80\x00\x00\x40\x00\x00\x00"
            b"U\x01bN[#U\x03i\x05U\xffI\x01\x00"
            b"i\x01c{U\x01dTU\x01eFU\x01fZU\x01gSU\x02hiU\x01hCxU\x01jD\x3f\xf0\x00\x00\x00"
            b"\x00\x00\x00}"
            b"U\x01k[l\x00\x00\x00\x07L\x00\x00\x00\x00\x00\x00\x00\x08N]}")
    status, marker, elem, start, count, parent, key_start, key_len, end = index_values(
        np.frombuffer(data, np.uint8), MAX_DEPTH)
    assert status == 0
    keys = [data[s:s + n].decode() if s >= 0 else None for s, n in zip(key_start, key_len)]
    assert keys == [None, "a", "b", None, None, None, "c", "d", "e", "f", "g", "h", "j",
                    "k", None, None]
    assert bytes(marker).decode() == "{[[iUI{TFZSCD[lL"
    assert parent.tolist() == [-1, 0, 0, 2, 2, 2, 0, 6, 6, 6, 6, 6, 6, 0, 13, 13]
    assert count[[0, 1, 2, 6, 13]].tolist() == [4, 2, 3, 6, 2]
    assert elem[1] == ord("d") and np.frombuffer(data, ">f4", 2, start[1]).tolist() == [1, 2]
    assert data[start[10]:start[10] + count[10]] == b"hi"
    assert end[0] == len(data) and end[13] == len(data) - 1
    assert read_ubjson(data)["c"]["h"] == "x"


def test_index_values_restarts_with_a_larger_table():
    """A document of one-byte values has more of them than the first guess of the
    table's size (one row per 256 bytes): the walk restarts larger and finds all."""
    data = b"[" + b"Z" * 3000 + b"T" * 2000 + b"]"
    status, marker, *_, parent, _, _, end = index_values(np.frombuffer(data, np.uint8),
                                                         MAX_DEPTH)
    assert status == 0 and marker.size == 5001
    assert bytes(marker[1:]) == b"Z" * 3000 + b"T" * 2000
    assert np.all(parent[1:] == 0) and end[0] == len(data)


def test_gather_numbers_undoes_the_byte_order_of_every_size():
    from treeimp.kernels.ubjson_index import gather_numbers

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 4000).astype(np.uint8)
    dtypes = [np.dtype(t) for t in (">i1", ">u2", ">f4", ">i8", ">f8")]
    start = rng.integers(0, 3000, (3, len(dtypes)))
    count = rng.integers(0, 40, (3, len(dtypes)))
    itemsize = np.array([d.itemsize for d in dtypes])
    *words, at = gather_numbers(data, start, count, itemsize)
    assert [w.dtype for w in words] == [np.dtype(f"u{k}") for k in (1, 2, 4, 8)]
    words = dict(zip((1, 2, 4, 8), words))  # already in the host's order
    for j, d in enumerate(dtypes):
        got = words[d.itemsize][at[j]:at[j] + count[:, j].sum()]
        want = np.concatenate([np.frombuffer(data.tobytes(), d, int(count[t, j]),
                                             int(start[t, j])) for t in range(3)])
        assert np.array_equal(got.view(d.newbyteorder("=")), want, equal_nan=True)


def test_member_rows_finds_each_key_once_per_object():
    from treeimp.kernels.ubjson_index import member_rows
    from treeimp.parsers.xgb_flat import _encoded

    data = b"[{U\x01ai\x01U\x02bbi\x02U\x01ci\x03}{U\x02bbi\x04}{U\x01ai\x05U\x01ai\x06}]"
    _, _, _, _, _, parent, key_start, key_len, _ = index_values(
        np.frombuffer(data, np.uint8), MAX_DEPTH)
    buf = np.frombuffer(data, np.uint8)
    ok, found = member_rows(buf, parent, key_start, key_len, np.array([1, 5]),
                            *_encoded(("a", "bb", "x")))
    assert ok and found.tolist() == [[2, 3, -1], [-1, 6, -1]]
    ok, _ = member_rows(buf, parent, key_start, key_len, np.array([1, 5, 7]),
                        *_encoded(("a",)))
    assert not ok  # the third object holds "a" twice


@pytest.mark.parametrize("name", ["binary", "multiclass", "categorical"])
def test_flat_trees_carry_the_checked_normal_form(name):
    """The reader's one structure check (``FlatTrees.ordered``, which from_arrays does
    not repeat) is what the numba check of every tree gives: no problem, the same int32
    global children and features."""
    from treeimp.kernels.structure import check_trees_serial

    _, flat = read_model(bytes(MODELS[name].get_booster().save_raw("ubj")))
    problem, _, left, right, feature = check_trees_serial(
        flat.offsets, flat.left, flat.right, flat.feature, 5)
    assert not problem.any()
    for got, want in zip(flat.ordered, (left, right, feature)):
        assert got.dtype == np.int32 and np.array_equal(got, want)


def test_a_feature_out_of_range_is_reported_with_the_checked_form():
    """from_arrays given the caller's checked form still checks each split's feature
    against n_features, with the message it gives without it."""
    from treeimp.kernels.structure import ordered_trees
    from treeimp.model.ensemble import MAX_FEATURES, TreeEnsemble

    _, flat = read_model(bytes(MODELS["regression"].get_booster().save_raw("ubj")))
    feature = flat.feature.copy()
    split = np.flatnonzero(flat.left >= 0)
    feature[split[7]] = 5  # the model has features 0..4
    n = flat.left.size
    fields = {"left": flat.left, "right": np.where(flat.left >= 0, flat.right, -1),
              "feature": feature, "threshold": np.zeros(n), "missing_left": np.zeros(n, bool),
              "nan_mode": np.zeros(n, np.uint8), "weight": np.ones(n),
              "impurity": np.full(n, np.nan), "gain": np.full(n, np.nan),
              "value": np.zeros((n, 1)), "cover": np.full(n, np.nan)}
    kw = dict(tree_output=np.zeros(flat.n_trees, np.int32), tree_scale=np.ones(flat.n_trees),
              tree_learning_rate=np.ones(flat.n_trees),
              tree_stage=np.arange(flat.n_trees), kind="boosting", n_features=5,
              n_outputs=1, comparison="<", round_float32=True)
    ordered = ordered_trees(flat.offsets, flat.left, flat.right, feature, MAX_FEATURES)
    assert ordered is not None
    messages = []
    for given in (None, ordered):
        with pytest.raises(ValueError) as info:
            TreeEnsemble.from_arrays(flat.offsets, fields, [{}] * flat.n_trees,
                                     ordered=given, **kw)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "feature 5" in messages[0], messages
    ens = TreeEnsemble.from_arrays(flat.offsets, {**fields, "feature": flat.feature},
                                   [{}] * flat.n_trees, ordered=flat.ordered, **kw)
    assert np.array_equal(ens.feature, flat.ordered[2])


def test_node_counts_of_every_digit_length_are_read():
    """Trees of 1, 2-digit and 3-digit node counts in one model: each tree_param
    num_nodes text matches its count, so the flat reader takes the model."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + 0.1 * rng.normal(size=3000)
    booster = xgb.train({"max_depth": 9, "eta": 0.3, "nthread": 1}, xgb.DMatrix(X, y), 3)
    booster = xgb.train({"max_depth": 4, "nthread": 1}, xgb.DMatrix(X, y), 2,
                        xgb_model=booster)
    booster = xgb.train({"max_depth": 1, "min_split_loss": 1e9, "nthread": 1},
                        xgb.DMatrix(X, y), 1, xgb_model=booster)
    got = read_model(bytes(booster.save_raw("ubj")))
    assert got is not None
    sizes = np.diff(got[1].offsets)
    assert {len(str(n)) for n in sizes.tolist()} == {1, 2, 3}, sizes
