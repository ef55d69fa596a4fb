"""The normal form: TreeEnsemble, its routing (predict_raw, apply), offsets, losses
and the grouped kernel inputs it hands to the kernels."""
