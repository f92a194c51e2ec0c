"""Document stores: CouchDB over aiohttp for deployments, SQLite for the embedded mode."""

from whisk.store.base import Conflict, Store, StoreError, StoreUnavailable, WriteResult

__all__ = ["Conflict", "Store", "StoreError", "StoreUnavailable", "WriteResult"]
