"""Spark DataFrames: recognised without importing pyspark, their columns named and
checked on the driver, and their Arrow batches turned into the arrays treeimp reads.

A Spark DataFrame holds the features either as one vector column (``features_col``: a
``pyspark.ml.linalg`` vector, dense or sparse, or an array of numbers) or as plain
numeric columns (``feature_cols``), beside the label, sample weight, offset and row
identity columns. :func:`evaluation_columns` checks them against the schema and the
model; :meth:`EvaluationColumns.project` selects them, with reserved names, into the
DataFrame whose Arrow batches every partition reads; :func:`batch_arrays` turns one
batch into X, y, sample_weight, base_margin and the rows' identities.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from ..inputs.extras import require_modules

SPARK_EXTRA = 'pip install "treeimp[spark]"'

# names of the non-feature columns in the projected DataFrame (no feature may use them)
ID = "_treeimp_row_id"
LABEL = "_treeimp_label"
WEIGHT = "_treeimp_weight"
MARGIN = "_treeimp_base_margin"
VECTOR = "_treeimp_features"
_RESERVED = (ID, LABEL, WEIGHT, MARGIN, VECTOR)

_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")
_NUMERIC = _INTEGRAL + ("FloatType", "DoubleType", "DecimalType", "BooleanType")


def is_spark_dataframe(x) -> bool:
    """True for a ``pyspark.sql.DataFrame`` (classic or Spark Connect); reads the type's
    module only, so it never imports pyspark."""
    module = type(x).__module__ or ""
    return module.split(".", 1)[0] == "pyspark" and type(x).__name__ == "DataFrame"


def require_spark(what="a Spark DataFrame"):
    """Import pyspark (with pyarrow, which its Arrow batches need), or raise ImportError
    naming the extra to install."""
    require_modules(("pyspark", "pyarrow"), what, "Spark support needs pyspark and pyarrow",
                    SPARK_EXTRA)
    return importlib.import_module("pyspark")


def classic_session(sdf, what):
    """The SparkSession of ``sdf``, refusing Spark Connect (broadcast variables and
    RDDs, which the reduction uses, exist on classic sessions only)."""
    if ".connect." in (type(sdf).__module__ or ""):
        raise TypeError(f"{what}: X is a Spark Connect DataFrame; treeimp needs a classic "
                        "Spark session (it broadcasts the model and reduces the partitions' "
                        "statistics on the RDD API, which Spark Connect does not offer)")
    return sdf.sparkSession


@dataclass(frozen=True)
class EvaluationColumns:
    """The columns of a Spark DataFrame that hold the evaluation rows.

    ``features`` the plain feature columns in the model's order (or None), ``vector``
    the vector / array column (or None); ``label``, ``weight``, ``margin`` the columns
    of y, sample_weight and base_margin (or None); ``identity`` the column of the rows'
    identities (None: added with ``monotonically_increasing_id``).
    """

    features: tuple | None
    vector: str | None
    label: str | None
    weight: str | None
    margin: str | None
    identity: str | None

    def project(self, sdf):
        """``sdf`` reduced to these columns: the identity, label, weight and margin under
        reserved names, a vector column as an array of float64, plain features under
        their own names."""
        from pyspark.ml.functions import vector_to_array
        from pyspark.ml.linalg import VectorUDT
        from pyspark.sql import functions as F

        cols = [F.monotonically_increasing_id().alias(ID) if self.identity is None
                else F.col(_quoted(self.identity)).cast("long").alias(ID)]
        for name, alias in ((self.label, LABEL), (self.weight, WEIGHT),
                            (self.margin, MARGIN)):
            if name is not None:
                cols.append(F.col(_quoted(name)).alias(alias))
        if self.vector is not None:
            v = F.col(_quoted(self.vector))
            if isinstance(sdf.schema[self.vector].dataType, VectorUDT):
                v = vector_to_array(v, dtype="float64")
            cols.append(v.cast("array<double>").alias(VECTOR))
        else:
            cols += [F.col(_quoted(c)) for c in self.features]
        return sdf.select(*cols)


def evaluation_columns(sdf, ens, model=None, *, label_col=None, features_col=None,
                       feature_cols=None, id_col=None, weight_col=None,
                       base_margin_col=None) -> EvaluationColumns:
    """Check the named columns against ``sdf``'s schema and the model.

    Features: ``features_col`` (a vector or numeric array column) or ``feature_cols``
    (numeric columns, matched to the model's feature names as a table's columns are);
    neither: a Spark ML model's own ``features_cols`` / ``featuresCol`` parameter
    (xgboost.spark), else the model's feature names when ``sdf`` has them all.
    ``label_col`` defaults to a Spark ML model's ``labelCol`` when ``sdf`` has it.

    Raises
    ------
    ValueError
        A column is missing, of a type treeimp cannot read, named twice, or uses a
        reserved name; both or neither of ``features_col`` and ``feature_cols`` can be
        resolved; the number of plain feature columns differs from the model's.
    """
    columns = list(sdf.columns)
    types = {f.name: f.dataType for f in sdf.schema.fields}
    if features_col is not None and feature_cols is not None:
        raise ValueError("give the features either as one vector column (features_col=) or "
                         "as plain columns (feature_cols=), not both")
    if features_col is None and feature_cols is None:
        features_col, feature_cols = _model_features(model, ens, columns)
    if label_col is None:
        label = _param(model, "labelCol")
        label_col = label if label in columns else None
    for what, name in (("label_col", label_col), ("features_col", features_col),
                       ("id_col", id_col), ("weight_col", weight_col),
                       ("base_margin_col", base_margin_col)):
        if name is not None:
            _check_present(name, what, columns)
    if feature_cols is not None:
        if isinstance(feature_cols, str):
            raise TypeError(f"feature_cols must be a list of column names, got the string "
                            f"{feature_cols!r} (one vector column: features_col=)")
        feature_cols = tuple(str(c) for c in feature_cols)
        for c in feature_cols:
            _check_present(c, "feature_cols", columns)
        dup = sorted({c for c in feature_cols if feature_cols.count(c) > 1})
        if dup:
            raise ValueError(f"feature_cols names {dup[:10]} more than once")
        if len(feature_cols) != ens.n_features:
            raise ValueError(f"feature_cols has {len(feature_cols)} columns but the model was "
                             f"trained on {ens.n_features} features")
        bad = [f"{c} ({types[c].simpleString()})" for c in feature_cols
               if type(types[c]).__name__ not in _NUMERIC]
        if bad:
            raise ValueError(f"feature columns must be numeric (or boolean); got {bad[:10]} "
                             "(encode categories as numbers first, as the model was trained)")
        reserved = sorted(set(feature_cols) & set(_RESERVED))
        if reserved:
            raise ValueError(f"feature columns may not be named {reserved} (names treeimp "
                             "reserves for its own columns); rename them")
    else:
        _check_vector(features_col, types[features_col])
    _check_type(id_col, types, _INTEGRAL, "id_col", "an integer type")
    _check_type(weight_col, types, _NUMERIC, "weight_col", "numeric")
    if base_margin_col is not None:
        t = types[base_margin_col]
        if type(t).__name__ == "ArrayType":
            _check_type(base_margin_col, {base_margin_col: t.elementType}, _NUMERIC,
                        "base_margin_col's elements", "numeric")
        else:
            _check_type(base_margin_col, types, _NUMERIC, "base_margin_col",
                        "numeric or an array of numbers")
    return EvaluationColumns(features=feature_cols, vector=features_col, label=label_col,
                             weight=weight_col, margin=base_margin_col, identity=id_col)


def batch_arrays(batch, cols: EvaluationColumns):
    """(X, y, sample_weight, base_margin, identities) of one Arrow batch of the projected
    DataFrame: X a float64 array (n, n_features) from a vector column, else a pyarrow
    Table of the feature columns under their names; identities int64."""
    import pyarrow as pa

    n = batch.num_rows
    names = batch.schema.names
    ids = _column(batch, ID, "the row identity").astype(np.int64, copy=False)
    y = w = b = None
    if LABEL in names:
        y = _column(batch, LABEL, f"the label column {cols.label!r}")
    if WEIGHT in names:
        w = _column(batch, WEIGHT, f"the weight column {cols.weight!r}").astype(np.float64)
    if MARGIN in names:
        b = _numbers(batch.column(MARGIN), n, f"the base margin column {cols.margin!r}")
    if cols.vector is not None:
        X = _numbers(batch.column(VECTOR), n, f"the features column {cols.vector!r}")
        if X.ndim == 1:
            X = X.reshape(n, -1)
    else:
        X = pa.Table.from_batches([batch.select(list(cols.features))])
    return X, y, w, b, ids


def check_identities(ids):
    """ValueError when a chunk's row identities repeat (two rows would share one
    jackknife block slot and one position)."""
    if len(ids) > 1:
        s = np.sort(ids)
        same = s[1:] == s[:-1]
        if same.any():
            raise ValueError(f"the row identity column has {int(same.sum())} repeated values "
                             f"(e.g. {int(s[1:][same][0])}); every row needs its own "
                             "identity (id_col)")


# ------------------------------------------------------------------------ helpers
def _quoted(name):
    return "`" + name.replace("`", "``") + "`"


def _param(model, name):
    """A Spark ML model's parameter value (None when absent, unset or not Spark ML)."""
    try:
        if model is not None and hasattr(model, "hasParam") and model.hasParam(name) \
                and model.isDefined(name):
            return model.getOrDefault(name)
    except Exception:  # a parameter that cannot be read is not a default
        return None
    return None


def _model_features(model, ens, columns):
    """(features_col, feature_cols) from a Spark ML model's parameters, else the
    model's feature names when the DataFrame has them all."""
    plain = _param(model, "features_cols")
    if plain and all(c in columns for c in plain):
        return None, tuple(plain)
    vector = _param(model, "featuresCol")
    if vector and vector in columns:
        return vector, None
    names = ens.feature_names
    if names is not None and all(str(c) in columns for c in names):
        return None, tuple(str(c) for c in names)
    raise ValueError("name the feature columns of the Spark DataFrame: features_col= (one "
                     "vector or array column) or feature_cols= (numeric columns); the model "
                     "names no features the DataFrame holds")


def _check_present(name, what, columns):
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a column name (str), got {name!r}")
    if name not in columns:
        raise ValueError(f"{what}={name!r} is not a column of the Spark DataFrame; its "
                         f"columns are {columns[:20]}{' ...' if len(columns) > 20 else ''}")


def _check_vector(name, dtype):
    kind = type(dtype).__name__
    if kind == "VectorUDT":
        return
    if kind == "ArrayType" and type(dtype.elementType).__name__ in _NUMERIC:
        return
    raise ValueError(f"features_col={name!r} must be a pyspark.ml.linalg vector or an array "
                     f"of numbers, got {dtype.simpleString()} (plain numeric columns: "
                     "feature_cols=)")


def _check_type(name, types, allowed, what, expected):
    if name is not None and type(types[name]).__name__ not in allowed:
        raise ValueError(f"{what}={name!r} must be {expected}, got "
                         f"{types[name].simpleString()}")


def _column(batch, name, what):
    col = batch.column(name)
    if col.null_count:
        raise ValueError(f"{what} has {col.null_count} null values in a batch of "
                         f"{batch.num_rows} rows")
    return col.to_numpy(zero_copy_only=False)


def _numbers(col, n, what):
    """A numeric column as float64 (n,), or a list column of equal lengths as (n, k)."""
    import pyarrow as pa

    if col.null_count:
        raise ValueError(f"{what} has {col.null_count} null values in a batch of {n} rows")
    if not pa.types.is_list(col.type) and not pa.types.is_large_list(col.type):
        return col.to_numpy(zero_copy_only=False).astype(np.float64)
    offsets = col.offsets.to_numpy()
    sizes = np.diff(offsets)
    if n and np.any(sizes != sizes[0]):
        i = int(np.flatnonzero(sizes != sizes[0])[0])
        raise ValueError(f"{what} holds vectors of different lengths ({int(sizes[0])} and "
                         f"{int(sizes[i])}, at rows 0 and {i} of a batch)")
    values = col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if values.null_count:
        raise ValueError(f"{what} has {values.null_count} null entries in its vectors")
    width = int(sizes[0]) if n else 0
    return values.to_numpy(zero_copy_only=False).astype(np.float64).reshape(n, width)
