"""The SQLite file's tables and indexes, and its schema version.

The jobs table's state filters and counts (``Store.find_jobs``, ``Store.count_jobs``) read what grows with
the jobs in that state, not with the jobs stored. A job not enabled is paused, disabled or done: three
partial indexes over those jobs alone lead by ``STOPPED`` (which of the three), one per order, so that each
of those states is one range of an index in any order, and is counted from one. Failing, alerting and held
jobs (a condition, an alert raised, a hold whose end is ahead of the time asked about) have an index per
order over them alone, and are counted from one. Enabled jobs are most: a sort's own index finds a page of
them, and their count is what the others leave of the total, which triggers keep (``COUNTER``). The fire
path's UPDATE of a job meets these as partial indexes that hold stopped, failing, alerting or held jobs.
"""

from __future__ import annotations

from ticklock.adapters.records import EXECUTION_FIELDS, LEDGER_FIELDS

# 2: jobs.disabled_reason; 3: jobs.policy and the fire ledger; 4: executions.jitter and .detached, jobs.hold,
# .alerts and .open_alerts; 5: the runs' summary (jobs.last_status, .last_at, .runs, .runs_ok) and the jobs
# table's sort indexes; 6: a fire's execution unique by its columns (job_id, scheduled_at, trigger), one index
# that also lists a job's executions, where a UNIQUE fire_key and executions_job were two (``FIRE_UNIQUE``);
# 7: jobs.hold_until (a timed hold's end, for the ``held`` state), the next-fire sort over enabled jobs only,
# and the indexes and the counter the state filters and counts read
SCHEMA_VERSION = 7
# Each fire's execution INSERT puts an entry in every index of the table, and an index led by the job's id
# takes it at a page of its own: one index serves both a fire's uniqueness (its columns are what
# ``fire_key`` is made of) and a job's listing (ties on the slot, a rare manual fire at a scheduled
# instant, sorted by id in a step of SQLite's own).
FIRE_UNIQUE = "job_id, scheduled_at DESC, trigger"


# which state a job not enabled is in (``domain.states``): the leading key of the indexes over those jobs
STOPPED = "CASE WHEN disabled_reason IS NOT NULL THEN 'disabled' WHEN next_run_at IS NULL THEN 'done' ELSE 'paused' END"
# ``FAILED_STATUSES``, as the indexes over failing jobs are made with it (a query's condition must read the
# same). Not ``IN (...)``: each UPDATE of a job's last run built that list's table again for each such index.
FAILING = "(last_status = 'failed' OR last_status = 'timeout' OR last_status = 'lost')"
# the next fire as a listing sorts by it: only an enabled job has one
NEXT_FIRE = "(CASE WHEN enabled = 1 THEN next_run_at END)"


def _ordered(name: str, lead: str, where: str, *, next_fire: bool = True, by_id: str = "id") -> list[str]:
    """The partial indexes over the jobs ``where`` holds, one for each order of a listing (``lead``, the
    columns each starts with): ``{name}_id``, ``{name}_name``, ``{name}_next``, ``{name}_last``."""
    keys = {"_id": by_id, "_name": "name", "_next": f"{NEXT_FIRE}, id" if next_fire else None, "_last": "last_at, id"}
    return [
        f"CREATE INDEX IF NOT EXISTS {name}{suffix} ON jobs ({lead}{columns}) WHERE {where}"
        for suffix, columns in keys.items()
        if columns is not None
    ]


EXECUTIONS = """
    CREATE TABLE IF NOT EXISTS {name} (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        fire_key TEXT NOT NULL,
        handler TEXT NOT NULL,
        trigger TEXT NOT NULL,
        scheduled_at INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        deadline_at INTEGER NOT NULL,
        run_token TEXT NOT NULL,
        owner TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        resumes INTEGER NOT NULL,
        finished_at INTEGER,
        duration REAL,
        error TEXT,
        jitter REAL NOT NULL DEFAULT 0,
        detached INTEGER NOT NULL DEFAULT 0
    )"""
SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        handler TEXT NOT NULL,
        schedule TEXT NOT NULL,
        payload TEXT NOT NULL,
        timeout REAL NOT NULL,
        max_retries INTEGER NOT NULL,
        enabled INTEGER NOT NULL,
        next_run_at INTEGER,
        trigger_at INTEGER,
        due_at INTEGER,
        lease_token TEXT,
        lease_owner TEXT,
        lease_until INTEGER,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        disabled_reason TEXT,
        policy TEXT,
        hold TEXT,
        hold_until INTEGER,
        alerts TEXT,
        open_alerts TEXT,
        backfill TEXT,
        last_status TEXT,
        last_at INTEGER,
        runs INTEGER NOT NULL DEFAULT 0,
        runs_ok INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_due ON jobs (due_at) WHERE due_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS jobs_handler ON jobs (handler, id)",
    "CREATE INDEX IF NOT EXISTS jobs_alerting ON jobs (id) WHERE alerts IS NOT NULL OR open_alerts IS NOT NULL",
    # the jobs table's sorts (by name: the unique index), each page one range scan; by next fire, the enabled
    # jobs in order, then those with none (paused, disabled, done) by id
    "CREATE INDEX IF NOT EXISTS jobs_next_fire ON jobs (next_run_at, id) WHERE enabled = 1",
    "CREATE INDEX IF NOT EXISTS jobs_no_fire ON jobs (id) WHERE (enabled = 0 OR next_run_at IS NULL)",
    "CREATE INDEX IF NOT EXISTS jobs_last ON jobs (last_at, id)",
    # the state filters and counts (the module's docstring), an index for each order by id, name, next fire
    # and last run: the jobs not enabled, led by which of paused, disabled and done they are
    *_ordered("jobs_stopped", f"{STOPPED}, ", "enabled = 0", next_fire=False),
    *_ordered("jobs_failing", "", FAILING),
    *_ordered("jobs_raised", "", "open_alerts IS NOT NULL"),
    # the jobs with a timed hold (held, or just past its end), by id with the hold's end: counted from it
    *_ordered("jobs_holding", "", "hold_until IS NOT NULL", by_id="id, hold_until, enabled"),
    # schema 7's first (unreleased) index of held jobs, which jobs_holding_id replaces; schema 5's of failing
    # jobs, which jobs_failing_name does (made with IN: ``FAILING``)
    "DROP INDEX IF EXISTS jobs_held",
    "DROP INDEX IF EXISTS jobs_failing",
    "DROP TRIGGER IF EXISTS jobs_restated",  # kept the stopped states' counts for an hour of schema 7's making
    # an enabled job without a next fire: none, as a rule (the end of a listing of enabled jobs by next fire)
    "CREATE INDEX IF NOT EXISTS jobs_unscheduled ON jobs (id) WHERE enabled = 1 AND next_run_at IS NULL",
    EXECUTIONS.format(name="executions"),
    # one execution a fire (job, slot, trigger: what ``fire_key`` spells), and a job's executions newest first
    f"CREATE UNIQUE INDEX IF NOT EXISTS executions_fire ON executions ({FIRE_UNIQUE})",
    "CREATE INDEX IF NOT EXISTS executions_finished ON executions (finished_at)",
    "CREATE INDEX IF NOT EXISTS executions_time ON executions (scheduled_at DESC)",
    "CREATE INDEX IF NOT EXISTS executions_detached ON executions (deadline_at) "
    "WHERE detached = 1 AND status IN ('running', 'interrupted')",
    """
    CREATE TABLE IF NOT EXISTS ledger (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NOT NULL,
        first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        count INTEGER NOT NULL,
        capped INTEGER NOT NULL,
        trigger TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS ledger_job ON ledger (job_id, first_at DESC)",
    "CREATE INDEX IF NOT EXISTS ledger_time ON ledger (first_at DESC)",
    "CREATE INDEX IF NOT EXISTS ledger_last ON ledger (last_at)",
]
TABLES = [s for s in SCHEMA if s.lstrip().startswith("CREATE TABLE")]
INDEXES = [s for s in SCHEMA if s not in TABLES]
# How many jobs there are, kept by the file itself on each insert and delete whoever writes (a COUNT reads
# every page of an index); not the states: a trigger on the UPDATE of a job would run on the fire path's
# every advance, which the partial indexes over the states already serve.
# Made and counted once, when the file lacks the table (in the migration's transaction: no write between).
COUNTER = [
    "CREATE TABLE jobs_counts (state TEXT PRIMARY KEY, n INTEGER NOT NULL)",
    "INSERT INTO jobs_counts VALUES ('total', (SELECT COUNT(*) FROM jobs))",
    """CREATE TRIGGER jobs_added AFTER INSERT ON jobs BEGIN
        UPDATE jobs_counts SET n = n + 1 WHERE state = 'total';
    END""",
    """CREATE TRIGGER jobs_deleted AFTER DELETE ON jobs BEGIN
        UPDATE jobs_counts SET n = n - 1 WHERE state = 'total';
    END""",
]
# The jobs table's search (``Store.find_jobs``' ``search``: a name or handler that contains it, whatever the
# case): a trigram index of the two columns (SQLite's FTS5), which finds the jobs a rare word names without
# reading every job; kept by the file itself on each insert, delete and rename, whoever writes them. Its rows
# are the jobs' rowids, which VACUUM keeps for this table (``test_sqlite_search``). Made and filled once, when
# the file lacks it (in the migration's transaction), or lacks one of its triggers.
SEARCH = [
    "DROP TABLE IF EXISTS jobs_search",
    """CREATE VIRTUAL TABLE jobs_search USING fts5(
        name, handler, content='jobs', content_rowid='rowid', tokenize='trigram'
    )""",
    "INSERT INTO jobs_search (jobs_search) VALUES ('rebuild')",
    """CREATE TRIGGER IF NOT EXISTS jobs_search_added AFTER INSERT ON jobs BEGIN
        INSERT INTO jobs_search (rowid, name, handler) VALUES (new.rowid, new.name, new.handler);
    END""",
    """CREATE TRIGGER IF NOT EXISTS jobs_search_deleted AFTER DELETE ON jobs BEGIN
        INSERT INTO jobs_search (jobs_search, rowid, name, handler) VALUES ('delete', old.rowid, old.name, old.handler);
    END""",
    """CREATE TRIGGER IF NOT EXISTS jobs_search_renamed AFTER UPDATE OF name, handler ON jobs BEGIN
        INSERT INTO jobs_search (jobs_search, rowid, name, handler) VALUES ('delete', old.rowid, old.name, old.handler);
        INSERT INTO jobs_search (rowid, name, handler) VALUES (new.rowid, new.name, new.handler);
    END""",
]
SEARCH_TRIGGERS = ("jobs_search_added", "jobs_search_deleted", "jobs_search_renamed")
# the columns added since the first schema, by version: a file written before one gains it when opened
ADDED_COLUMNS = [
    ("jobs", "disabled_reason", "TEXT"),  # 2
    ("jobs", "policy", "TEXT"),  # 3
    ("executions", "jitter", "REAL NOT NULL DEFAULT 0"),  # 4
    ("executions", "detached", "INTEGER NOT NULL DEFAULT 0"),  # 4
    ("jobs", "hold", "TEXT"),  # 4
    ("jobs", "alerts", "TEXT"),  # 4
    ("jobs", "open_alerts", "TEXT"),  # 4
    ("jobs", "backfill", "TEXT"),  # 4
    ("jobs", "last_status", "TEXT"),  # 5
    ("jobs", "last_at", "INTEGER"),  # 5
    ("jobs", "runs", "INTEGER NOT NULL DEFAULT 0"),  # 5
    ("jobs", "runs_ok", "INTEGER NOT NULL DEFAULT 0"),  # 5
    ("jobs", "hold_until", "INTEGER"),  # 7
]
# a file written before 6 has fire_key UNIQUE (an index of the table's own, which only a rebuild drops)
REBUILT = ("executions", "fire_key", EXECUTIONS)
_ENDED = "e.job_id = jobs.id AND e.status NOT IN ('running', 'interrupted')"
# what a file gains once, when it is opened by a ticklock of that version: 5 fills the runs' summary
# from the executions kept
BACKFILLS = {
    5: [
        f"""UPDATE jobs SET
            runs = (SELECT COUNT(*) FROM executions e WHERE {_ENDED}),
            runs_ok = (SELECT COUNT(*) FROM executions e WHERE {_ENDED} AND e.status = 'success'),
            last_status = (SELECT e.status FROM executions e WHERE {_ENDED} ORDER BY e.finished_at DESC LIMIT 1),
            last_at = (SELECT e.finished_at FROM executions e WHERE {_ENDED} ORDER BY e.finished_at DESC LIMIT 1)
        WHERE last_status IS NULL"""
    ],
    7: [  # the hold's end to the millisecond (SQLite's dates): enough to tell whether it is still ahead
        """UPDATE jobs SET hold_until = CAST(ROUND(
            (julianday(json_extract(hold, '$.resumes_at')) - 2440587.5) * 86400000.0) AS INTEGER) * 1000
        WHERE hold IS NOT NULL AND json_extract(hold, '$.resumes_at') IS NOT NULL""",
        "DROP INDEX IF EXISTS jobs_next",  # 5's next-fire sort over every job: jobs_next_fire replaces it
    ],
}
JOB_COLUMNS = (
    "id, name, handler, schedule, payload, timeout, max_retries, enabled, next_run_at, trigger_at, "
    "due_at, lease_token, lease_owner, lease_until, version, created_at, updated_at, disabled_reason, policy, hold, "
    "alerts, open_alerts, backfill, last_status, last_at, runs, runs_ok, hold_until"
)
JOB_SLOTS = ", ".join("?" * len(JOB_COLUMNS.split(",")))
EXEC_COLUMNS = ", ".join(EXECUTION_FIELDS)
EXEC_SLOTS = ", ".join("?" * len(EXECUTION_FIELDS))
LEDGER_COLUMNS = ", ".join(LEDGER_FIELDS)
