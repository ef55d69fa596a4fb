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
import stat
import warnings

from ..inputs.files import open_regular, stat_path
from ..model.ensemble import TreeEnsemble
from .catboost import parse_catboost_json
from .lgbm import parse_lightgbm_bytes, parse_lightgbm_text
from .rounds import select_trees
from .ubjson import read_ubjson
from .xgb import parse_xgboost_json, stored_best_iteration
from .xgb_flat import read_model

_XGB_EXTENSIONS = (".json", ".ubj")
_LGBM_EXTENSIONS = (".txt",)
# exceptions a damaged document can raise inside a parser (wrong types where a
# structure was expected); they are reported as a ValueError naming the file
_DAMAGE = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
           RecursionError)


def load(path, *, iteration_range=None, missing=None) -> TreeEnsemble:
    """Normal form of a saved XGBoost (.json / .ubj), LightGBM (.txt) or CatBoost (.json)
    model file.

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

    if stat.S_ISDIR(stat_path(name, "model file").st_mode):  # names a symlink loop too
        raise ValueError(f"model path {name!r} is a directory, not a model file")
    data = _read_regular_file(name)
    kind = _sniff(data)
    if kind is None:
        raise ValueError(_unknown_message(name, data))
    try:
        if kind == "lightgbm":
            ens = _load_lightgbm(data)
        elif kind == "catboost":
            ens = _load_catboost(data)
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
                "lightgbm": "LightGBM text", "catboost": "CatBoost JSON"}[kind]
        if isinstance(exc, RecursionError):
            detail = "it is nested too deeply to be a model"
        elif isinstance(exc, OverflowError):
            detail = "it holds a number too large for the field it is in (past int64)"
        else:
            detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"cannot read {what} model file {name!r}: {detail}") from None
    return select_trees(ens, iteration_range, None, missing)


def _read_regular_file(name):
    """The bytes of a regular file. Devices (/dev/zero, which never ends), FIFOs and
    sockets (which block) are refused before anything is read
    (:func:`treeimp.inputs.files.open_regular`)."""
    with open_regular(name, "model path", "save the model to a file and pass its path") as fh:
        return fh.read()


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
    if data[:2] == b"\x1f\x8b":
        return (f"model file {name!r} is gzip-compressed; decompress it first (gunzip, or "
                "gzip.open in Python) and load the file inside")
    if ext in _XGB_EXTENSIONS:
        return (f"model file {name!r} is not an XGBoost JSON/UBJSON model (it does not "
                "start with '{'); XGBoost's legacy binary format is not supported: load it "
                "with xgboost and save_model() it as .json or .ubj")
    if ext in _LGBM_EXTENSIONS:
        return f"model file {name!r} is not a LightGBM text model (no leading 'tree' line)"
    return (f"model file {name!r} has an unknown extension {ext or '(none)'!r} and its "
            "content is not recognised; expected an XGBoost .json / .ubj, a LightGBM "
            ".txt or a CatBoost .json model")


def _load_xgboost(data: bytes, kind: str):
    """(ensemble, the stored best_iteration or None)."""

    if kind == "json":
        doc = _json_document(data, parse_int=_int64)
        return parse_xgboost_json(doc), stored_best_iteration(doc)

    got = read_model(data)  # all trees at once, as for a live booster
    if got is not None:
        doc, flat = got
        return parse_xgboost_json(doc, flat_trees=flat), stored_best_iteration(doc)
    doc = read_ubjson(data)  # layouts the all-trees reader leaves to the per-tree path
    return parse_xgboost_json(doc), stored_best_iteration(doc)


def _int64(text):
    """A JSON integer, which must fit int64 (every integer XGBoost writes does)."""
    value = int(text)
    if not -(2**63) <= value < 2**63:
        shown = text if len(text) <= 24 else f"{text[:10]}...{text[-4:]} ({len(text)} digits)"
        raise ValueError(f"the integer {shown} is outside the int64 range")
    return value


def _json_document(data: bytes, parse_int=None):
    try:
        return json.loads(data.decode("utf-8-sig"), parse_int=parse_int)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid or truncated JSON: {exc}") from None
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to be a model (model files nest a "
                         "few levels)") from None


def _load_catboost(data: bytes) -> TreeEnsemble:
    return parse_catboost_json(_json_document(data))


def _load_lightgbm(data: bytes) -> TreeEnsemble:
    if data.isascii():  # valid UTF-8 without a byte order mark, read as bytes
        return parse_lightgbm_bytes(data)
    try:
        text = data.decode("utf-8-sig")  # a byte order mark (Windows editors) is skipped
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_lightgbm_text(text)
