"""The candidate store of a run folder: one SQLite file (standard library), written before and after each step.

``run_dir/candidates.sqlite`` holds three tables:

- ``run``: one row, the task (JSON), the policy, the seed, when it was created, the stop reason and
  free-form JSON (the final re-measurement, the stop rules used);
- ``candidates``: every :class:`~hello_gpu.agent.candidate.Candidate` field, the unified diff from its
  parent, the source's sha256 and when it was created and last updated;
- ``tool_results``: every tool's JSON output, by candidate and tool, with the time it was written.

Every write is its own committed transaction in WAL mode, so a crash, a kill or Ctrl-C between two
steps loses nothing already written, and ``resume`` reads the run back as it was.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from .candidate import Candidate

STORE_NAME = "candidates.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    task TEXT NOT NULL,
    policy TEXT NOT NULL,
    seed INTEGER NOT NULL,
    created REAL NOT NULL,
    stop_reason TEXT,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    parent_id INTEGER,
    round INTEGER NOT NULL DEFAULT 0,
    route TEXT NOT NULL,
    source TEXT NOT NULL,
    companion TEXT,
    action TEXT NOT NULL DEFAULT '',
    hypothesis TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    results TEXT NOT NULL DEFAULT '{}',
    diff TEXT NOT NULL DEFAULT '',
    source_sha256 TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    candidate_id INTEGER,
    tool TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL
);
"""


def task_to_dict(task) -> dict:
    """A Task as plain JSON (tuples become lists; shapes stay ints or lists)."""
    from dataclasses import asdict
    return json.loads(json.dumps(asdict(task), default=str))


def task_from_dict(data: dict):
    """The Task back from :func:`task_to_dict` (lists of shapes back to tuples)."""
    from .task import Task

    def shape(value):
        return tuple(value) if isinstance(value, list) else value

    data = dict(data)
    data["dtypes"] = tuple(data.get("dtypes") or ())
    data["check_shapes"] = tuple(shape(s) for s in data.get("check_shapes") or ())
    data["bench_shape"] = shape(data.get("bench_shape"))
    data["distributions"] = tuple(data.get("distributions") or ())
    known = set(Task.__dataclass_fields__)
    return Task(**{key: value for key, value in data.items() if key in known})


class CandidateStore:
    """The SQLite store of one run folder. Open it with the folder; every method commits at once."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / STORE_NAME
        # isolation_level=None: autocommit; each statement (or explicit BEGIN..COMMIT) is durable on return.
        self.connection = sqlite3.connect(str(self.path), isolation_level=None, timeout=30)
        self.connection.row_factory = sqlite3.Row
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.executescript(_SCHEMA)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "CandidateStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the run
    def start_run(self, task, policy: str, seed: int, extra: dict | None = None) -> None:
        """Write the run's row (once: a second call on an existing run raises, use :meth:`run_info`)."""
        if self.run_info() is not None:
            raise ValueError(f"{self.path} already holds a run; resume it instead of starting another")
        self.connection.execute(
            "INSERT INTO run (id, schema_version, task, policy, seed, created, extra) VALUES (1, ?, ?, ?, ?, ?, ?)",
            (SCHEMA_VERSION, json.dumps(task_to_dict(task)), policy, int(seed), time.time(), json.dumps(extra or {})))

    def run_info(self) -> dict | None:
        """``{"task": dict, "policy", "seed", "created", "stop_reason", "extra": dict}`` or None."""
        row = self.connection.execute("SELECT * FROM run WHERE id = 1").fetchone()
        if row is None:
            return None
        return {"task": json.loads(row["task"]), "policy": row["policy"], "seed": row["seed"],
                "created": row["created"], "stop_reason": row["stop_reason"], "extra": json.loads(row["extra"]),
                "schema_version": row["schema_version"]}

    def task(self):
        info = self.run_info()
        if info is None:
            raise ValueError(f"{self.path} holds no run")
        return task_from_dict(info["task"])

    def set_stop_reason(self, reason: str | None) -> None:
        self.connection.execute("UPDATE run SET stop_reason = ? WHERE id = 1", (reason,))

    def update_run_extra(self, **values) -> dict:
        """Merge ``values`` into the run's free-form JSON (the final re-measurement, stop rules ...)."""
        info = self.run_info() or {"extra": {}}
        extra = {**info["extra"], **values}
        self.connection.execute("UPDATE run SET extra = ? WHERE id = 1", (json.dumps(extra),))
        return extra

    # ------------------------------------------------------------------ candidates
    def add(self, candidate: Candidate, round_number: int = 0) -> Candidate:
        """Store a new candidate; sets and returns it with its ``id`` (the diff is against its parent)."""
        parent = self.get(candidate.parent_id) if candidate.parent_id is not None else None
        now = time.time()
        cursor = self.connection.execute(
            "INSERT INTO candidates (parent_id, round, route, source, companion, action, hypothesis, state, reason, "
            "results, diff, source_sha256, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)",
            (candidate.parent_id, round_number, candidate.route, candidate.source, candidate.companion,
             candidate.action, candidate.hypothesis, candidate.state, candidate.reason,
             json.dumps(candidate.results), candidate.source_sha256, now, now))
        candidate.id = int(cursor.lastrowid)
        self.connection.execute("UPDATE candidates SET diff = ? WHERE id = ?",
                                (candidate.diff_from(parent), candidate.id))
        return candidate

    def update(self, candidate: Candidate) -> None:
        """Write the candidate's state, reason and results as they are now."""
        if candidate.id is None:
            raise ValueError("update() needs a stored candidate (id is None): add() it first")
        self.connection.execute(
            "UPDATE candidates SET state = ?, reason = ?, results = ?, action = ?, hypothesis = ?, updated = ? "
            "WHERE id = ?", (candidate.state, candidate.reason, json.dumps(candidate.results), candidate.action,
                             candidate.hypothesis, time.time(), candidate.id))

    @staticmethod
    def _candidate(row) -> Candidate:
        return Candidate(id=row["id"], parent_id=row["parent_id"], route=row["route"], source=row["source"],
                         companion=row["companion"], action=row["action"], hypothesis=row["hypothesis"],
                         state=row["state"], reason=row["reason"], results=json.loads(row["results"]))

    def get(self, candidate_id: int) -> Candidate:
        row = self.connection.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise KeyError(f"no candidate {candidate_id} in {self.path}")
        return self._candidate(row)

    def row(self, candidate_id: int) -> dict:
        """Everything stored of one candidate, the columns the Candidate lacks included (diff, round, times)."""
        row = self.connection.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise KeyError(f"no candidate {candidate_id} in {self.path}")
        data = dict(row)
        data["results"] = json.loads(data["results"])
        return data

    def list(self, state: str | None = None) -> list[Candidate]:
        """Every candidate in the order they were added (only those in ``state`` when given)."""
        if state is None:
            rows = self.connection.execute("SELECT * FROM candidates ORDER BY id").fetchall()
        else:
            rows = self.connection.execute("SELECT * FROM candidates WHERE state = ? ORDER BY id", (state,)).fetchall()
        return [self._candidate(row) for row in rows]

    def rounds(self) -> dict[int, int]:
        """Candidate id -> the round that proposed it."""
        return {row["id"]: row["round"] for row in self.connection.execute("SELECT id, round FROM candidates")}

    def last_round(self) -> int:
        value = self.connection.execute("SELECT MAX(round) FROM candidates").fetchone()[0]
        return int(value) if value is not None else 0

    def best_accepted(self) -> Candidate | None:
        """The current best: the last accepted candidate (each accept beat the best before it)."""
        row = self.connection.execute(
            "SELECT * FROM candidates WHERE state = 'accepted' ORDER BY id DESC LIMIT 1").fetchone()
        return self._candidate(row) if row is not None else None

    def by_sha256(self, sha256: str) -> Candidate | None:
        """A candidate with this source already tried (a policy proposing it twice gets the first)."""
        row = self.connection.execute("SELECT * FROM candidates WHERE source_sha256 = ? ORDER BY id LIMIT 1",
                                      (sha256,)).fetchone()
        return self._candidate(row) if row is not None else None

    # ------------------------------------------------------------------ tool results
    def add_result(self, candidate_id: int | None, tool: str, result: dict) -> None:
        self.connection.execute("INSERT INTO tool_results (candidate_id, tool, result, created) VALUES (?, ?, ?, ?)",
                                (candidate_id, tool, json.dumps(result, default=str), time.time()))

    def results(self, candidate_id: int | None = None, tool: str | None = None) -> list[dict]:
        """Tool results in the order written: ``{"candidate_id", "tool", "result", "created"}``."""
        query, arguments = "SELECT * FROM tool_results", []
        conditions = []
        if candidate_id is not None:
            conditions.append("candidate_id = ?")
            arguments.append(candidate_id)
        if tool is not None:
            conditions.append("tool = ?")
            arguments.append(tool)
        if conditions:
            query += " WHERE " + " AND ".join(conditions)
        rows = self.connection.execute(query + " ORDER BY id", arguments).fetchall()
        return [{"candidate_id": row["candidate_id"], "tool": row["tool"], "result": json.loads(row["result"]),
                 "created": row["created"]} for row in rows]
