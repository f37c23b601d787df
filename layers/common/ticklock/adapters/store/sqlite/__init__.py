"""The embedded store: one SQLite file, safe for several processes on one machine.

Times are stored as integer microseconds since the epoch (UTC). Every write runs in a ``BEGIN
IMMEDIATE`` transaction, so two ``ticklock serve`` processes sharing the file serialise their claims;
the claim itself is one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` statement. WAL mode
with ``synchronous=NORMAL``: a power cut can lose the last commits, never corrupt the file.
"""

from __future__ import annotations

from ticklock.adapters.store.sqlite.executions import Executions
from ticklock.adapters.store.sqlite.fires import Fires
from ticklock.adapters.store.sqlite.jobs import Jobs
from ticklock.adapters.store.sqlite.ledger import Ledger
from ticklock.adapters.store.sqlite.rows import from_us, us
from ticklock.adapters.store.sqlite.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "from_us", "us"]


class SQLiteStore(Jobs, Fires, Executions, Ledger):
    """The ``Store`` port on one SQLite file, a role a module: connection.py ``StoreConnection`` (the file,
    transactions, readers), jobs.py ``JobStore`` (with listing.py, the jobs table's pages and counts),
    fires.py ``FireStore`` (claims, executions' start and finish, advances), executions.py
    ``ExecutionStore`` (reads, pruning), ledger.py ``LedgerStore`` (the fires that did not run), over
    schema.py and rows.py."""
