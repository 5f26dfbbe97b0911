"""The PostgreSQL backend of the store contract (asyncpg): one database shared by any
number of processes. Selected by a ``postgresql://`` or ``postgres://`` URL through
:func:`reconcile.store.open_store`; see :mod:`.backend` for its story."""
