"""The SQLite backend of the store."""
