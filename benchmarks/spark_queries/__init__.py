"""The Spark benchmark: Drill logical plans against hand-written PySpark, same data, same run.

* :mod:`.data` generates the data set (``--scale``): TPC-H-like ``lineitem``, ``orders`` and
  ``customer`` as parquet, nested JSON-lines ``events`` in one directory per day, and a CSV table
  ``prospects.csv``.
* ``plans/*.json`` are the queries as logical plans; :mod:`.handwritten` has the PySpark a good
  engineer would write for each, producing the same records.
* ``benchmarks/spark_queries.py`` runs both and reports the ratios.
"""
