"""The ``jdbc`` storage engine: PostgreSQL tables, read and written by both executors.

* :mod:`~engine.storage.jdbc.engine`: :class:`JdbcEngine`, its configuration and selections.
* :mod:`~engine.storage.jdbc.sql`: the SQL it sends (identifiers quoted, values bound).
* :mod:`~engine.storage.jdbc.adbc`: reads on the local executor (ADBC).
* :mod:`~engine.storage.jdbc.write`: atomic stores (staging table, swap in one transaction).
"""

from __future__ import annotations

from engine.storage.jdbc.engine import JdbcEngine, ScanSource
from engine.storage.jdbc.sql import TableName

__all__ = ["JdbcEngine", "ScanSource", "TableName"]
