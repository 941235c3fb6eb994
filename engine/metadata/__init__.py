"""The metadata repository: tables, schemas, statistics and engine capabilities (seed 000).

Stores record what they commit (:mod:`engine.storage.version_file`); the SQL front end
(:mod:`engine.sql`) and the planner ask :class:`MetadataRepository`.
"""

from __future__ import annotations

from engine.metadata.repository import (
    MetadataRepository,
    TableInfo,
    TableStatistics,
    recorded_metadata,
)
from engine.metadata.sampling import sample_schema
from engine.storage.version_file import VersionMetadata, metadata_path, read_version_metadata

__all__ = [
    "MetadataRepository",
    "TableInfo",
    "TableStatistics",
    "VersionMetadata",
    "metadata_path",
    "read_version_metadata",
    "recorded_metadata",
    "sample_schema",
]
