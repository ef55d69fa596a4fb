"""Class labels -> positions among the model's classes (``inputs.targets.class_indices``):
the sorted match of numeric and text labels gives what a dictionary lookup of every label
gives (Python's equality: 1 == 1.0 == True; the last of repeated classes), and labels the
model never saw are named as before."""

import numpy as np
import pytest

from treeimp.inputs.targets import LABEL_CHUNK, class_indices


def _dict_lookup(y, classes):
    """The independent truth: each label's position through a dict of the classes."""
    lookup = {c: k for k, c in enumerate(np.asarray(classes).tolist())}
    return np.array([lookup[v] for v in np.asarray(y).tolist()], dtype=np.int64)


CASES = {
    "int32 labels, int64 classes": (np.array([0, 1, 1, 0, 1], np.int32), np.array([0, 1])),
    "float labels, int classes": (np.array([2.0, 0.0, 1.0, 2.0]), np.array([0, 1, 2])),
    "int labels, float classes": (np.array([3, 1, 3], np.int64), np.array([1.0, 3.0])),
    "bool labels, int classes": (np.array([True, False, True]), np.array([0, 1])),
    "uint8 labels, int8 classes": (np.array([5, 7, 5], np.uint8), np.array([7, 5], np.int8)),
    "float32 labels, float64 classes": (np.array([0.5, 1.5, 0.5], np.float32),
                                        np.array([1.5, 0.5])),
    "text labels": (np.array(["b", "a", "ccc", "b"]), np.array(["a", "b", "ccc"])),
    "repeated classes: the last wins": (np.array([1, 2, 1]), np.array([1, 2, 1, 2])),
    "negative labels, unsorted classes": (np.array([-3, 4, -3, 0]), np.array([4, 0, -3])),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_class_indices_match_a_dict_lookup(name, dtype):
    y, classes = CASES[name]
    got = class_indices(y, classes, dtype=dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _dict_lookup(y, classes))


def test_class_indices_over_several_chunks_of_rows():
    rng = np.random.default_rng(0)
    classes = np.array([10, -2, 7, 3])
    y = rng.choice(classes, size=2 * LABEL_CHUNK + 17).astype(np.int16)
    np.testing.assert_array_equal(class_indices(y, classes), _dict_lookup(y, classes))


@pytest.mark.parametrize("y, classes, unseen", [
    (np.array([0, 1, 5, 1]), np.array([0, 1]), "[5]"),
    (np.array([0.0, 0.5]), np.array([0, 1]), "[0.5]"),
    (np.array(["a", "z"]), np.array(["a", "b"]), "['z']"),
    (np.array([1, 2]), np.array(["1", "2"]), "[1, 2]"),
    # 2**53 + 1 is not the float 2**53 for a dict, although numpy's float64 would say so
    (np.array([2 ** 53 + 1], np.int64), np.array([float(2 ** 53)]), str([2 ** 53 + 1])),
])
def test_unseen_labels_are_named(y, classes, unseen):
    with pytest.raises(ValueError, match="labels the model never saw: " + unseen.replace(
            "[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        class_indices(y, classes)
    with pytest.raises(KeyError):
        _dict_lookup(y, classes)


def test_object_labels_keep_the_dict_lookup():
    y = np.array(["b", 1, "b"], dtype=object)
    classes = np.array([1, "b"], dtype=object)
    np.testing.assert_array_equal(class_indices(y, classes), _dict_lookup(y, classes))
