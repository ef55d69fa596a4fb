"""Held-out rows in a Spark DataFrame (the optional extra ``pip install "treeimp[spark]"``).

Importing this package does not import pyspark: :func:`is_spark_dataframe` recognises a
Spark DataFrame by its type's module, so ``treeimp`` works without pyspark installed
and only a Spark DataFrame passed in asks for it.
"""

from .frames import SPARK_EXTRA, is_spark_dataframe, require_spark

__all__ = ["SPARK_EXTRA", "is_spark_dataframe", "require_spark"]
