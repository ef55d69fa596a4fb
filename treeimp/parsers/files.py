"""Saved model files -> TreeEnsemble, without importing xgboost or lightgbm.

Recognised by content (the extension only names what was expected when the content is
not recognised):

* XGBoost JSON (``booster.save_model("m.json")``): a JSON object;
* XGBoost UBJSON (``save_model("m.ubj")``, the default format of XGBoost >= 2.1): a
  binary object starting with ``{`` and a length marker;
* LightGBM text (``booster.save_model("m.txt")``): starts with a ``tree`` line.

Every failure (missing file, unknown format, truncated or corrupt content, unsupported
model) is a ``ValueError`` naming the path and the problem. Reading is linear in the
file size, so a corrupt file fails quickly instead of hanging.
"""

from __future__ import annotations

import json
import os
import warnings

from ..ensemble import TreeEnsemble

_XGB_EXTENSIONS = (".json", ".ubj")
_LGBM_EXTENSIONS = (".txt",)
# exceptions a damaged document can raise inside a parser (wrong types where a
# structure was expected); they are reported as a ValueError naming the file
_DAMAGE = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
           RecursionError)


def load(path, *, iteration_range=None, missing=None) -> TreeEnsemble:
    """Normal form of a saved XGBoost (.json / .ubj) or LightGBM (.txt) model file.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    iteration_range : (start, stop), optional
        Boosting rounds to use (XGBoost's meaning; stop 0: the last). Default: every
        tree in the file, as a ``Booster`` loaded from it predicts. An XGBoost file
        that stores ``best_iteration`` (early stopping) is still read with all its
        trees, with a warning: pass ``iteration_range=(0, best_iteration + 1)`` for
        the early-stopped model.
    missing : float, optional
        XGBoost's ``missing``: input values equal to it are routed as missing (the
        file does not store the wrapper's ``missing`` parameter).

    Returns
    -------
    TreeEnsemble
        Class labels are not stored in these files (``classes`` is None). An XGBoost
        file does not store the learning rate either: it is recovered from the node
        weights (see ``treeimp.parsers.xgb_shrinkage``).

    Raises
    ------
    ValueError
        The file is missing, has an unknown format, is truncated or corrupt, or holds
        an unsupported model.

    Examples
    --------
    >>> import treeimp  # doctest: +SKIP
    >>> ens = treeimp.load("model.ubj")  # doctest: +SKIP
    >>> ens.predict_raw(X)  # doctest: +SKIP
    """
    try:
        name = os.fspath(path)
    except TypeError:
        raise TypeError(f"load() needs a file path, got {type(path).__name__}") from None
    if not os.path.exists(name):
        raise ValueError(f"model file {name!r} does not exist")
    if os.path.isdir(name):
        raise ValueError(f"model path {name!r} is a directory, not a model file")
    with open(name, "rb") as fh:
        data = fh.read()
    kind = _sniff(data)
    if kind is None:
        raise ValueError(_unknown_message(name, data))
    try:
        if kind == "lightgbm":
            ens = _load_lightgbm(data)
        else:
            ens, best = _load_xgboost(data, kind)
            if best is not None and iteration_range is None:
                warnings.warn(
                    f"XGBoost model file {name!r} stores best_iteration={best} (early "
                    f"stopping); it is read with all {ens.n_rounds} rounds, as "
                    "xgboost.Booster.predict uses them. Pass iteration_range=(0, "
                    f"{best + 1}) for the early-stopped model", UserWarning, stacklevel=2)
    except _DAMAGE as exc:
        what = {"json": "XGBoost JSON", "ubjson": "XGBoost UBJSON",
                "lightgbm": "LightGBM text"}[kind]
        detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"cannot read {what} model file {name!r}: {detail}") from None
    from . import select_trees

    return select_trees(ens, iteration_range, None, missing)


def _sniff(data: bytes):
    """'json', 'ubjson', 'lightgbm' or None, from the first bytes."""
    head = data[:64].lstrip()
    if head.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark
        head = head[3:].lstrip()
    if head.startswith(b"{"):  # UBJSON object keys start with an integer length marker
        return "ubjson" if head[1:2] in (b"i", b"U", b"I", b"l", b"L", b"$", b"#") else "json"
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n"):
        return "lightgbm"
    return None


def _unknown_message(name, data):
    ext = os.path.splitext(name)[1].lower()
    if len(data) == 0:
        return f"model file {name!r} is empty"
    if ext in _XGB_EXTENSIONS:
        return (f"model file {name!r} is not an XGBoost JSON/UBJSON model (it does not "
                "start with '{'); XGBoost's legacy binary format is not supported: load it "
                "with xgboost and save_model() it as .json or .ubj")
    if ext in _LGBM_EXTENSIONS:
        return f"model file {name!r} is not a LightGBM text model (no leading 'tree' line)"
    return (f"model file {name!r} has an unknown extension {ext or '(none)'!r} and its "
            "content is not recognised; expected an XGBoost .json / .ubj or a LightGBM "
            ".txt model")


def _load_xgboost(data: bytes, kind: str):
    """(ensemble, the stored best_iteration or None)."""
    from .xgb import parse_xgboost_json, stored_best_iteration

    if kind == "json":
        try:
            doc = json.loads(data.decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid or truncated JSON: {exc}") from None
    else:
        from .ubjson import read_ubjson

        doc = read_ubjson(data)
    return parse_xgboost_json(doc), stored_best_iteration(doc)


def _load_lightgbm(data: bytes) -> TreeEnsemble:
    try:
        from .lgbm import parse_lightgbm_text
    except ImportError as exc:
        raise ValueError("LightGBM text models need treeimp.parsers.lgbm.parse_lightgbm_text, "
                         f"which is not available ({exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_lightgbm_text(text)
