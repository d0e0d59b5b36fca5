"""A collection's documents, indexes and data size as the backend's collStats
reports them, and its indexes' names (listIndexes), asked directly (not
through remold).

  figures(db, collection) -> CollectionFigures

mongo-java-server answers collStats with count, size and nindexes, but no
index entry counts or byte sizes (its indexSize holds per-index entry counts
for _id only) and has no $collStats stage; so index entries are reckoned
here as documents x indexes, which is what a backend holds for indexes on
fields that are not arrays: use it for such collections only.
"""
from __future__ import annotations

from dataclasses import dataclass

from pymongo.database import Database


@dataclass(frozen=True)
class CollectionFigures:
    documents: int
    indexes: int
    data_bytes: int
    index_names: list[str]

    @property
    def index_entries(self) -> int:
        """documents x indexes: exact for indexes on fields that hold no arrays."""
        return self.documents * self.indexes


def figures(db: Database, collection: str) -> CollectionFigures:
    stats = db.command("collStats", collection)
    return CollectionFigures(int(stats["count"]), int(stats["nindexes"]), int(stats["size"]),
                             [index["name"] for index in db[collection].list_indexes()])
