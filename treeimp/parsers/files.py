"""Saved model files -> TreeEnsemble, without importing xgboost, lightgbm or catboost.

Recognised by content (the extension only names what was expected when the content is
not recognised):

* XGBoost JSON (``booster.save_model("m.json")``): a JSON object;
* XGBoost UBJSON (``save_model("m.ubj")``, the default format of XGBoost >= 2.1): a
  binary object starting with ``{`` and a length marker;
* LightGBM text (``booster.save_model("m.txt")``): starts with a ``tree`` line;
* CatBoost JSON (``model.save_model("m.json", format="json")``): a JSON object whose
  first key is ``"ctr_data"`` or ``"features_info"`` (CatBoost writes its keys sorted).

Every failure (missing file, unknown format, truncated or corrupt content, unsupported
model) is a ``ValueError`` naming the path and the problem. Reading is linear in the
file size, so a corrupt file fails quickly instead of hanging.
"""

from __future__ import annotations

import json
import os

from ..ensemble import TreeEnsemble

_XGB_EXTENSIONS = (".json", ".ubj")
_LGBM_EXTENSIONS = (".txt",)
# exceptions a damaged document can raise inside a parser (wrong types where a
# structure was expected); they are reported as a ValueError naming the file
_DAMAGE = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
           RecursionError)


def load(path) -> TreeEnsemble:
    """Normal form of a saved XGBoost (.json / .ubj), LightGBM (.txt) or CatBoost (.json)
    model file.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.

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
            return _load_lightgbm(data)
        if kind == "catboost":
            return _load_catboost(data)
        return _load_xgboost(data, kind)
    except _DAMAGE as exc:
        what = {"json": "XGBoost JSON", "ubjson": "XGBoost UBJSON",
                "lightgbm": "LightGBM text", "catboost": "CatBoost JSON"}[kind]
        detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"cannot read {what} model file {name!r}: {detail}") from None


def _sniff(data: bytes):
    """'json', 'ubjson', 'lightgbm' or None, from the first bytes."""
    head = data[:64].lstrip()
    if head.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark
        head = head[3:].lstrip()
    if head.startswith(b"{"):  # UBJSON object keys start with an integer length marker
        if head[1:2] in (b"i", b"U", b"I", b"l", b"L", b"$", b"#"):
            return "ubjson"
        first_key = head[1:].lstrip()
        if first_key.startswith((b'"ctr_data"', b'"features_info"')):
            return "catboost"
        return "json"
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
            "content is not recognised; expected an XGBoost .json / .ubj, a LightGBM "
            ".txt or a CatBoost .json model")


def _load_xgboost(data: bytes, kind: str) -> TreeEnsemble:
    from .xgb import parse_xgboost_json

    if kind == "json":
        doc = _json_document(data)
    else:
        from .ubjson import read_ubjson

        doc = read_ubjson(data)
    return parse_xgboost_json(doc)


def _json_document(data: bytes):
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid or truncated JSON: {exc}") from None


def _load_catboost(data: bytes) -> TreeEnsemble:
    from .catboost import parse_catboost_json

    return parse_catboost_json(_json_document(data))


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
