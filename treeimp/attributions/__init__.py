"""Per-row contributions (local explanations): TreeSHAP and Saabas, in-bag and out of
bag, and the SHAP-oob measure built on them."""
