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

This module only splits the text into its sections (header dict, where each tree's
values are, the parameters dict, the decoded ``pandas_categorical`` list) and checks
its framing; the numbers are read and checked in :mod:`treeimp.parsers.lgbm`. The tree
blocks, nearly all of the text, are located by one pass over its bytes
(``kernels.text_blocks``) when they are laid out as LightGBM writes them; any other
text is read line by line (:func:`scan_model_text`), which names what is wrong. Every
loop is linear in the length of the text, so damaged input fails fast with a
ValueError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..kernels.text_blocks import STATUS_OK, scan_blocks

# the keys of a tree block that are read (LightGBM 4.x writes these and no others)
TREE_KEY_NAMES = ("num_leaves", "num_cat", "split_feature", "split_gain", "threshold",
                  "decision_type", "left_child", "right_child", "leaf_value", "leaf_weight",
                  "leaf_count", "internal_value", "internal_weight", "internal_count",
                  "is_linear", "shrinkage", "cat_boundaries", "cat_threshold", "leaf_const",
                  "num_features", "leaf_features", "leaf_coeff")
KEY_INDEX = {key: k for k, key in enumerate(TREE_KEY_NAMES)}
_KEY_BYTES = np.frombuffer("".join(TREE_KEY_NAMES).encode("ascii"), dtype=np.uint8)
_KEY_OFFSETS = np.concatenate([[0], np.cumsum([len(k) for k in TREE_KEY_NAMES])]
                              ).astype(np.int64)


@dataclass
class TreeValues:
    """Where each tree's values are: ``buf[spans[t, k, 0]:spans[t, k, 1]]`` (uint8) is the
    value of key ``TREE_KEY_NAMES[k]`` in tree t, ``spans[t, k, 0] == -1`` where the tree
    has no such key. ``block_starts``: the byte offset of each ``Tree=`` line and of the
    ``end of trees`` line (for ``tree_sizes``), None when the text was read line by line
    (``buf`` then holds the values alone)."""

    buf: np.ndarray
    spans: np.ndarray
    block_starts: np.ndarray | None

    def __len__(self):
        return self.spans.shape[0]

    def has(self, t, key):
        return bool(self.spans[t, KEY_INDEX[key], 0] >= 0)

    def text(self, t, key, default=None):
        """Tree t's value of ``key`` as a str, without surrounding whitespace."""
        a, b = self.spans[t, KEY_INDEX[key]]
        if a < 0:
            return default
        return self.buf[a:b].tobytes().decode("utf-8", errors="replace").strip()


@dataclass
class ModelText:
    """The sections of a LightGBM model text."""

    header: dict
    trees: TreeValues
    parameters: dict | None
    pandas_categorical: list | None


def _values_of_blocks(blocks):
    """TreeValues of per-tree dicts of value strings (keys not in TREE_KEY_NAMES are
    not read and left out)."""
    spans = np.full((len(blocks), len(TREE_KEY_NAMES), 2), -1, dtype=np.int64)
    parts = []
    at = 0
    for t, block in enumerate(blocks):
        for key, value in block.items():
            k = KEY_INDEX.get(key)
            if k is None:
                continue
            data = value.encode("utf-8", errors="replace")
            spans[t, k] = at, at + len(data)
            parts.append(data)
            at += len(data)
    return TreeValues(np.frombuffer(b"".join(parts), dtype=np.uint8), spans, None)


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
    """Split a LightGBM model text into its sections, line by line.

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
    header, i = _scan_header(lines)

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
    parameters, pandas_categorical = _scan_trailer(lines, i + 1)
    return ModelText(header, _values_of_blocks(trees), parameters, pandas_categorical)


def scan_model_bytes(data: bytes, text: str | None = None) -> ModelText:
    """:func:`scan_model_text` of a model text given as its UTF-8 bytes (no byte order
    mark), with the tree blocks located by ``kernels.text_blocks.scan_blocks``;
    ``text``: the same text as a str, when the caller has it. Text that is not laid out
    as LightGBM writes it is read by :func:`scan_model_text`, so the sections, and the
    errors, are the same."""
    first = data.find(b"\nTree=")
    if first >= 0:
        # the header's lines are those line by line reading gives: the prefix ends with
        # a line feed
        head = data[:first + 1].decode("utf-8").splitlines()
        header, i = _scan_header(head)
        if i == len(head):  # the header ends at the first Tree= line, as line by line
            # room for the trees tree_sizes lists (more blocks: read line by line, which
            # reports the disagreement)
            n_max = (len(header["tree_sizes"].split()) if "tree_sizes" in header
                     else data.count(b"\nTree=", first) + 1)
            spans = np.full((n_max, len(TREE_KEY_NAMES), 2), -1, dtype=np.int64)
            starts = np.empty(n_max + 1, dtype=np.int64)
            buf = np.frombuffer(data, dtype=np.uint8)
            status, n_trees, end = scan_blocks(buf, first + 1, _KEY_BYTES, _KEY_OFFSETS,
                                               spans, starts)
            if status == STATUS_OK:
                parameters, pandas_categorical = _scan_trailer(
                    data[end:].decode("utf-8").splitlines(), 0)
                return ModelText(header, TreeValues(buf, spans[:n_trees],
                                                    starts[:n_trees + 1]),
                                 parameters, pandas_categorical)
    return scan_model_text(data.decode("utf-8") if text is None else text)


def _scan_header(lines):
    """The header dict and the index of the line after it (the first ``Tree=`` or
    ``end of trees`` line, or len(lines))."""
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
    return header, i


def _scan_trailer(lines, i):
    """The parameters dict and the decoded ``pandas_categorical`` of the lines from i
    (after ``end of trees``)."""
    n = len(lines)
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
    return parameters, pandas_categorical


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


def check_tree_sizes(text, sizes, block_starts=None):
    """``tree_sizes`` (the header's, as text) against the trees' blocks in ``text``.

    LightGBM reads tree i at the offset the sizes before it add up to (it does not look
    for the ``Tree=i`` line), so sizes that disagree with the blocks can make it read
    other trees than the text shows (sizes ``0 ...``: tree 0 twice). The size of tree i
    is the number of bytes from its ``Tree=`` line to the next tree's (or to ``end of
    trees``), as LightGBM writes it. ``block_starts``: those offsets, when the blocks
    were located in the bytes (``TreeValues.block_starts``; ``text`` is then not read).
    The caller has checked the number of sizes.
    """
    if block_starts is not None:
        _compare_sizes(sizes, np.diff(block_starts).tolist())
        return
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
    if text.isascii():
        actual = [b - a for a, b in zip(starts, starts[1:])]
    else:
        actual = [len(text[a:b].encode("utf-8")) for a, b in zip(starts, starts[1:])]
    _compare_sizes(sizes, actual)


def _compare_sizes(sizes, actual):
    for t, (word, size_t) in enumerate(zip(sizes.split(), actual)):
        try:
            size = int(word)
        except ValueError:
            raise ValueError(f"LightGBM header tree_sizes has {word[:20]!r} for tree {t}, "
                             "not an integer") from None
        if size != size_t:
            raise ValueError(f"LightGBM header tree_sizes gives tree {t} {size} bytes but its "
                             f"Tree= block has {size_t} (LightGBM reads each tree at the "
                             "offset tree_sizes gives; was the file edited?)")
