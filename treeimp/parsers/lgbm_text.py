"""Scanner for LightGBM's model text format (``Booster.model_to_string`` / ``save_model``).

The format (LightGBM 3.x and 4.x, ``version=v3`` / ``v4``)::

    tree
    version=v4
    num_class=1
    ...                              header: key=value lines (``average_output`` bare)
    <blank>
    Tree=0
    num_leaves=3
    split_feature=0 2                one ``Tree=i`` block of key=value lines per tree
    ...
    <blank>
    end of trees
    feature_importances:             optional sections after the trees
    ...
    parameters:
    [learning_rate: 0.1]
    ...
    end of parameters
    pandas_categorical:[["a", "b"]]  written by the Python package only

This module only splits the text into strings (header dict, one dict per tree, the
parameters dict, the decoded ``pandas_categorical`` list) and checks its framing; the
numbers are read and checked in :mod:`treeimp.parsers.lgbm`. Every loop is linear in
the length of the text, so damaged input fails fast with a ValueError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class ModelText:
    """The sections of a LightGBM model text, as strings."""

    header: dict
    trees: list
    parameters: dict | None
    pandas_categorical: list | None


def _key_value(line, where):
    if "=" in line:
        key, value = line.split("=", 1)
    else:  # bare flags such as ``average_output``
        key, value = line, ""
    key = key.strip()
    if not key:
        raise ValueError(f"LightGBM model text: line {line[:60]!r} in {where} has no key")
    return key, value.strip()


def _put(d, key, value, where):
    if key in d:
        raise ValueError(f"LightGBM model text: key {key!r} appears twice in {where} "
                         "(damaged or concatenated file)")
    d[key] = value


def scan_model_text(text: str) -> ModelText:
    """Split a LightGBM model text into its sections.

    Raises
    ------
    ValueError
        When the text is not a LightGBM model, is truncated (no ``end of trees``, an
        unterminated parameters section) or a section is malformed.
    """
    if not isinstance(text, str):
        raise TypeError(f"a LightGBM model text must be a str, got {type(text).__name__}")
    lines = text.splitlines()
    n = len(lines)
    i = 0
    while i < n and not lines[i].strip():
        i += 1
    if i == n or lines[i].strip() != "tree":
        raise ValueError("not a LightGBM model text: the first line must be 'tree' "
                         f"(got {lines[i][:60] if i < n else ''!r})")
    i += 1

    header: dict = {}
    while i < n and not lines[i].startswith("Tree=") and lines[i].strip() != "end of trees":
        line = lines[i].strip()
        if line:
            _put(header, *_key_value(line, "the header"), "the header")
        i += 1

    trees: list = []
    while i < n and lines[i].startswith("Tree="):
        label = lines[i][len("Tree="):].strip()
        if label != str(len(trees)):
            raise ValueError(f"LightGBM model text: block 'Tree={label[:20]}' found where "
                             f"Tree={len(trees)} was expected")
        where = f"tree {len(trees)}"
        block: dict = {}
        i += 1
        while i < n:  # the block's key=value lines, up to a blank line
            line = lines[i].strip()
            if not line or lines[i].startswith("Tree=") or line == "end of trees":
                break
            key, _, value = line.partition("=")  # (inlined _key_value / _put: hot loop)
            key = key.strip()
            if not key or key in block:
                _put(block, *_key_value(line, where), where)  # raises
            block[key] = value.strip()
            i += 1
        trees.append(block)
        while i < n and not lines[i].strip():
            i += 1
    if i == n:
        raise ValueError(f"LightGBM model text is truncated: 'end of trees' is missing "
                         f"(read {len(trees)} trees)")
    if lines[i].strip() != "end of trees":
        raise ValueError(f"LightGBM model text: unexpected line {lines[i][:60]!r} after "
                         f"tree {len(trees) - 1}")
    i += 1

    parameters = None
    pandas_categorical = None
    while i < n:
        line = lines[i].strip()
        i += 1
        if line == "parameters:":
            if parameters is not None:
                raise ValueError("LightGBM model text has two parameters sections")
            parameters = {}
            while i < n and lines[i].strip() != "end of parameters":
                entry = lines[i].strip()
                i += 1
                if not entry:
                    continue
                if not (entry.startswith("[") and entry.endswith("]") and ":" in entry):
                    raise ValueError(f"LightGBM model text: malformed parameter line "
                                     f"{entry[:60]!r}")
                key, value = entry[1:-1].split(":", 1)
                _put(parameters, key.strip(), value.strip(), "the parameters section")
            if i == n:
                raise ValueError("LightGBM model text is truncated: 'end of parameters' is "
                                 "missing")
            i += 1
        elif line.startswith("pandas_categorical:"):
            payload = line[len("pandas_categorical:"):]
            try:
                pandas_categorical = json.loads(payload)
            except ValueError as exc:
                raise ValueError(f"LightGBM model text: pandas_categorical is not valid JSON "
                                 f"({exc})") from None
            if pandas_categorical is not None and not (
                isinstance(pandas_categorical, list)
                and all(isinstance(c, list) for c in pandas_categorical)
            ):
                raise ValueError("LightGBM model text: pandas_categorical must be null or a "
                                 "list of category lists")
        # other lines (feature_importances section, blank lines) carry nothing we use
    return ModelText(header, trees, parameters, pandas_categorical)


def read_param(params, key, default, cast=float):
    """A training parameter; ``default`` (None: required) when the text has no
    parameters section. A section without the key is damaged."""
    if params is None:
        if default is None:
            raise ValueError(f"LightGBM model text has no parameters section, so the "
                             f"objective's {key!r} is unknown")
        return default
    if key not in params:
        raise ValueError(f"LightGBM parameters section has no {key!r}")
    try:
        return cast(params[key])
    except ValueError:
        raise ValueError(f"LightGBM parameter {key}={params[key][:30]!r} is not a "
                         f"{cast.__name__}") from None


def check_tree_sizes(text, sizes):
    """``tree_sizes`` (the header's, as text) against the trees' blocks in ``text``.

    LightGBM reads tree i at the offset the sizes before it add up to (it does not look
    for the ``Tree=i`` line), so sizes that disagree with the blocks can make it read
    other trees than the text shows (sizes ``0 ...``: tree 0 twice). The size of tree i
    is the number of bytes from its ``Tree=`` line to the next tree's (or to ``end of
    trees``), as LightGBM writes it. The caller has checked the number of sizes.
    """
    starts = []
    at = text.find("\nTree=")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\nTree=", at + 1)
    end = text.find("\nend of trees", starts[-1] if starts else 0)
    if not starts or end < 0:
        return  # the scanner has reported the framing
    starts.append(end + 1)
    # ASCII text (as LightGBM writes its trees): a block's bytes are its characters
    ascii_text = text.isascii()
    for t, word in enumerate(sizes.split()):
        try:
            size = int(word)
        except ValueError:
            raise ValueError(f"LightGBM header tree_sizes has {word[:20]!r} for tree {t}, "
                             "not an integer") from None
        actual = (starts[t + 1] - starts[t] if ascii_text
                  else len(text[starts[t]:starts[t + 1]].encode("utf-8")))
        if size != actual:
            raise ValueError(f"LightGBM header tree_sizes gives tree {t} {size} bytes but its "
                             f"Tree= block has {actual} (LightGBM reads each tree at the "
                             "offset tree_sizes gives; was the file edited?)")
