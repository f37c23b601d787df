"""The jobs table: a page of jobs by filters and order, and the counts by state (what the dashboard reads):
the ``JobStore`` role's reads that jobs.py's ``Jobs`` inherits.

Each read is one range of an index, whatever the number of jobs stored (``schema``'s docstring says which
index serves which state): a listing filtered by a state names its index (``INDEXED BY``), so that no
guess of the planner's walks a sort's index over every job looking for a few of them, and a page starts
where the previous one ended by a row value (``(key, id) > (:value, :last_id)``), one seek deep or not. A
search looks a rare word up in a trigram index and tests a common one on the jobs the order walks
(``_searched``).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from ticklock.adapters.store.sqlite.connection import Connection
from ticklock.adapters.store.sqlite.rows import job_from_row, us, utc_now
from ticklock.adapters.store.sqlite.schema import FAILING, JOB_COLUMNS, NEXT_FIRE, STOPPED
from ticklock.domain.jobs import Job
from ticklock.domain.states import JOB_FILTERS
from ticklock.ports import JOB_SORTS, JOB_TIME_SORTS, JobQuery

# each state and condition as a condition on the row (``domain.states``; the counts and the filter share
# them): ``:now`` is the instant a timed hold's end is compared with; the stopped states as the indexes over
# them are led
STATES = {
    "enabled": "enabled = 1 AND (hold_until IS NULL OR hold_until <= :now)",
    "paused": f"enabled = 0 AND {STOPPED} = 'paused'",
    "held": "enabled = 1 AND hold_until > :now",
    "disabled": f"enabled = 0 AND {STOPPED} = 'disabled'",
    "done": f"enabled = 0 AND {STOPPED} = 'done'",
    "failing": FAILING,
    "alerting": "open_alerts IS NOT NULL",
}
assert tuple(STATES) == JOB_FILTERS


def _family(prefix: str, *, next_fire: str | None = None) -> dict[str, str]:
    """The indexes ``schema._ordered`` names, by the sort each serves."""
    next_fire = next_fire or f"{prefix}_next"
    return {"id": f"{prefix}_id", "name": f"{prefix}_name", "next_run_at": next_fire, "last_at": f"{prefix}_last"}


# the index a listing filtered by a state reads, in each order (``schema``); the enabled jobs, most of them,
# are found by the sorts' own indexes over every job
_INDEXES = {
    **dict.fromkeys(("paused", "disabled", "done"), _family("jobs_stopped", next_fire="jobs_stopped_id")),
    "held": _family("jobs_holding"),
    "failing": _family("jobs_failing"),
    "alerting": _family("jobs_raised"),
}
# the most jobs a search may name to be looked up in the search index: a page of those is sorted from all of
# them, while a word more jobs hold is met soonest by walking the listing's order
SEARCH_FEW = 5000
# the filters no enabled job meets: a listing by next fire has nothing to look for among the enabled
_NOT_ENABLED = ("paused", "disabled", "done")
# the time a listing sorts by, where a job may have none: by next fire only an enabled job has one (a
# paused job keeps a next_run_at it will not fire at); over every job, two indexes (jobs_next_fire,
# jobs_no_fire), over a state's jobs one, on the expression NEXT_FIRE
_HAS_VALUE = {"next_run_at": "enabled = 1 AND next_run_at IS NOT NULL", "last_at": "last_at IS NOT NULL"}
_NO_VALUE = {"next_run_at": "(enabled = 0 OR next_run_at IS NULL)", "last_at": "last_at IS NULL"}


class Listing(Connection):
    def find_jobs(self, query: JobQuery, *, limit: int) -> list[Job]:
        clauses: list[str] = []
        args: dict[str, Any] = {"now": us(query.at or utc_now())}
        if query.search:
            clauses.append(self._searched(query.search, args))
        if query.handler is not None:
            clauses.append("handler = :handler")
            args["handler"] = query.handler
        if query.enabled is not None:
            clauses.append("enabled = :enabled")
            args["enabled"] = int(query.enabled)
        if query.state is not None:
            clauses.append(STATES[query.state])
        if query.outcome == "none":
            clauses.append("last_status IS NULL")
        elif query.outcome is not None:
            clauses.append("last_status = :outcome")
            args["outcome"] = query.outcome
        if query.sort not in JOB_SORTS:
            raise ValueError(f"unknown sort {query.sort!r}")
        index = _INDEXES[query.state][query.sort] if query.state in _INDEXES else None
        if query.sort in JOB_TIME_SORTS:
            return self._by_time(query, clauses, args, index, limit)
        column, way = query.sort, "DESC" if query.descending else "ASC"
        if query.after is not None:
            clauses.append(f"{column} {'<' if query.descending else '>'} :value")  # id and name are unique
            args["value"] = query.after[0]
        return self._page(clauses, args, index, f"{column} {way}", limit)

    def _searched(self, search: str, args: dict[str, Any]) -> str:
        """The condition a search puts on a job. A word of three characters or more that few jobs hold is
        looked up in the trigram index (``schema.SEARCH``); one that many hold, or a shorter one (which no
        trigram holds), is tested on each job the listing's order walks, which finds a page of them soonest."""
        args["search"] = search.lower()
        if len(search) >= 3:
            phrase = '"' + search.replace('"', '""') + '"'
            sql = "SELECT COUNT(*) FROM (SELECT 1 FROM jobs_search WHERE jobs_search MATCH ? LIMIT ?)"
            held = self._read(lambda c: c.execute(sql, (phrase, SEARCH_FEW + 1)).fetchone()[0])
            if held <= SEARCH_FEW:
                args["phrase"] = phrase
                return "rowid IN (SELECT rowid FROM jobs_search WHERE jobs_search MATCH :phrase)"
        return "(instr(lower(name), :search) > 0 OR instr(lower(handler), :search) > 0)"

    def _by_time(
        self, query: JobQuery, clauses: list[str], args: dict[str, Any], index: str | None, limit: int
    ) -> list[Job]:
        """A page by a time some jobs lack: those with a value in its order, then those without by id. The
        cursor's value says which part it is in (None: the second); each part is one range of an index."""
        column, way = query.sort, "DESC" if query.descending else "ASC"
        beyond = "<" if query.descending else ">"
        value, last_id = query.after if query.after is not None else (None, None)
        args = {**args, "value": None if value is None else us(value), "last_id": last_id}
        key, has, lacks = column, _HAS_VALUE[column], _NO_VALUE[column]
        if index is not None and column == "next_run_at":  # a state's index, on the expression
            key, has, lacks = NEXT_FIRE, f"{NEXT_FIRE} IS NOT NULL", f"{NEXT_FIRE} IS NULL"
        elif query.state == "enabled" and column == "next_run_at":
            lacks = "enabled = 1 AND next_run_at IS NULL"  # none, as a rule: jobs_unscheduled holds them
        jobs: list[Job] = []
        none_have_one = column == "next_run_at" and query.state in _NOT_ENABLED
        if (query.after is None or value is not None) and not none_have_one:
            cursor = [f"({key}, id) {beyond} (:value, :last_id)"] if value is not None else []
            jobs = self._page([*clauses, has, *cursor], args, index, f"{key} {way}, id {way}", limit)
        if len(jobs) < limit:
            cursor = [f"id {beyond} :last_id"] if query.after is not None and value is None else []
            lacking = index or ("jobs_unscheduled" if lacks.startswith("enabled = 1") else None)
            jobs += self._page([*clauses, lacks, *cursor], args, lacking, f"id {way}", limit - len(jobs))
        return jobs

    def _page(self, clauses: list[str], args: dict[str, Any], index: str | None, order: str, limit: int) -> list[Job]:
        where = " AND ".join(clauses) or "1=1"
        table = f"jobs INDEXED BY {index}" if index else "jobs"
        sql = f"SELECT {JOB_COLUMNS} FROM {table} WHERE {where} ORDER BY {order} LIMIT :limit"
        rows = self._read(lambda c: c.execute(sql, {**args, "limit": limit}).fetchall())
        return [job_from_row(r) for r in rows]

    def count_jobs(self, now: datetime) -> dict[str, int]:
        """The total as the file keeps it; each other state from the index over its jobs alone; enabled,
        what the others leave of the total (``schema``'s docstring)."""

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            total = conn.execute("SELECT n FROM jobs_counts WHERE state = 'total'").fetchone()[0]
            stopped = f"SELECT {STOPPED}, COUNT(*) FROM jobs INDEXED BY jobs_stopped_id WHERE enabled = 0 GROUP BY 1"
            counts = dict.fromkeys(STATES, 0) | dict(conn.execute(stopped).fetchall())
            for state in ("held", "failing", "alerting"):
                sql = f"SELECT COUNT(*) FROM jobs INDEXED BY {_INDEXES[state]['id']} WHERE {STATES[state]}"
                counts[state] = conn.execute(sql, {"now": us(now)}).fetchone()[0]
            counts["enabled"] = total - sum(counts[s] for s in ("paused", "held", "disabled", "done"))
            return {"total": total, **counts}

        return self._read(count)
