"""``hello-gpu records check``: every record valid and in its place, every entry's files as measured,
every claim met."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .schema import validate_record
from .store import PLAIN, SourceRules, load_json, relative_name, source_changes

# Where claims are looked for: the code a reader runs, not tests or build output.
CLAIM_DIRECTORIES = ("src", "examples", "benchmarks")
CLAIM_SUFFIXES = (".py", ".hip", ".cu")
SKIPPED_DIRECTORIES = {".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules"}


@dataclass
class CheckReport:
    """What ``check_records`` found. Paths are repo-relative, in posix form."""

    errors: list[str] = field(default_factory=list)      # unreadable, invalid, misplaced, source gone
    stale: list[str] = field(default_factory=list)       # a file it ran changed since it was measured
    missing: list[str] = field(default_factory=list)     # a claim without its record
    elsewhere: list[str] = field(default_factory=list)   # a claim the record says needs another GPU
    unmanaged: list[str] = field(default_factory=list)   # JSON without "schema": listed, not checked
    ok_count: int = 0                                    # managed records with nothing wrong

    @property
    def ok(self) -> bool:
        return not (self.errors or self.stale or self.missing)


def _check_location(record: dict, path: Path, root: Path) -> list[str]:
    """Claims find a record by its file name, so the file must sit where its contents say."""
    expected = f"records/{record['device']['slug']}/{record['name']}.json"
    actual = relative_name(path, root)
    return [] if actual == expected else [f"{actual}: the record says it belongs at {expected}"]


class _SourcesNow:
    """What each source runs today (``rules.sources_of``), worked out once per file."""

    def __init__(self, root: Path, rules: SourceRules):
        self.root, self.rules, self.known = root, rules, {}

    def __call__(self, path: str) -> list[str] | str:
        """Repo-relative paths, or the error that kept them from being listed."""
        if path not in self.known:
            try:
                files = self.rules.sources_of(self.root / path)
                self.known[path] = [relative_name(Path(f).resolve(), self.root) for f in files]
            except (ValueError, OSError) as error:
                self.known[path] = str(error)
        return self.known[path]


def _entry_findings(entry: dict, root: Path, rules: SourceRules, sources_now: _SourcesNow) -> tuple[list[str], list[str]]:
    """(errors, stale findings) for one entry's files."""
    source = entry.get("source")
    if source is None:
        return [], []
    if not (root / source["path"]).is_file():
        return [f"source {source['path']} no longer exists"], []
    listed = sources_now(source["path"]) if rules.sources_of is not None else None
    if isinstance(listed, str):
        return [f"the files {source['path']} runs cannot be listed: {listed}"], []
    if listed is not None and "sources" not in entry:
        # Its sha256 may follow an older hashing rule too, so it is no evidence either way.
        return [], ["its sources were not recorded (measured before records listed every file a rung runs), "
                    f"so what it ran cannot be checked; today it runs {', '.join(listed)}"]
    stale = [f"{changed['path']} changed since it was measured (recorded sha {changed['sha256'][:12]} "
             f"now {now[:12]})" if now is not None else f"{changed['path']}, which it ran, no longer exists"
             for changed, now in source_changes(entry, root, rules.hasher)]
    if listed is None:
        return [], stale
    now = listed
    recorded = [s["path"] for s in entry["sources"]]
    stale += [f"now also runs {path}, which it did not when measured" for path in now if path not in recorded]
    stale += [f"no longer runs {path}" for path in recorded if path not in now]
    return [], stale


def entry_findings(record: dict, root: Path, rules: SourceRules = PLAIN) -> list[list[str]]:
    """For each entry of ``record``, what ``records check`` would say about its files now (gone, changed since
    it was measured, running other files than it did): an empty list where the entry is as measured. For a
    writer that keeps entries of an older record (hello_gpu.ops.ladder merges a run into the record before it)."""
    sources_now = _SourcesNow(Path(root), rules)
    findings = []
    for entry in record["entries"]:
        errors, stale = _entry_findings(entry, Path(root), rules, sources_now)
        findings.append(errors + stale)
    return findings


def _check_sources(record: dict, name: str, root: Path, rules: SourceRules, sources_now: _SourcesNow,
                   report: CheckReport) -> bool:
    """Adds gone sources to errors and changed ones to stale; True when every file is as measured."""
    clean = True
    for index, entry in enumerate(record["entries"]):
        errors, stale = _entry_findings(entry, root, rules, sources_now)
        where = f"{name}: entries[{index}] {entry['variant']}"
        report.errors += [f"{where}: {finding}" for finding in errors]
        report.stale += [f"{where}: {finding}" for finding in stale]
        clean = clean and not errors and not stale
    return clean


def _check_one_record(path: Path, root: Path, rules: SourceRules, sources_now: _SourcesNow,
                      report: CheckReport) -> None:
    name = relative_name(path, root)
    data, error = load_json(path, root)
    if error:
        report.errors.append(error)
        return
    if not isinstance(data, dict) or "schema" not in data:
        report.unmanaged.append(name)
        return
    problems = validate_record(data, where=name)
    if problems:
        report.errors.extend(problems)
        return
    misplaced = _check_location(data, path, root)
    report.errors.extend(misplaced)
    if _check_sources(data, name, root, rules, sources_now, report) and not misplaced:
        report.ok_count += 1


def _claiming_files(root: Path):
    for directory in CLAIM_DIRECTORIES:
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in CLAIM_SUFFIXES and path.is_file() and not SKIPPED_DIRECTORIES & set(path.relative_to(root).parts):
                yield path


def find_claims(root: Path, claims_in) -> list[tuple[str, int, str]]:
    """(repo-relative file, line number, record name) for every claim (``claims_in(text)``) under the
    claim directories."""
    found = []
    for path in _claiming_files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found += [(relative_name(path, root), number, name) for number, name in claims_in(text)]
    return found


def _claim_problem(file: str, line: int, name: str, root: Path) -> str | None:
    """Why a claim is not met, or None: some records/*/NAME.json must measure this very file. A claim of
    OP.DTYPE is also met by one route's ladder record, OP.ROUTE.DTYPE (``hello-gpu ladder --route``, e.g. the
    hip rungs of matmul.float32 measured alone on a second GPU as matmul.hip.float32)."""
    candidates = sorted((root / "records").glob(f"*/{name}.json"))
    if name.count(".") == 1:
        op, dtype = name.split(".")
        candidates += [path for path in sorted((root / "records").glob(f"*/{op}.*.{dtype}.json"))
                       if _route_of(path, root) == path.name.split(".")[1]]
    where = f"{file}:{line}: claims record {name!r}"
    if not candidates:
        return f"{where}, but there is no records/*/{name}.json (missing record)"
    for candidate in candidates:
        data, _ = load_json(candidate, root)
        entries = data.get("entries") if isinstance(data, dict) else None
        if isinstance(entries, list) and any(isinstance(e, dict) and isinstance(e.get("source"), dict)
                                             and e["source"].get("path") == file for e in entries):
            return None
    found = ", ".join(relative_name(c, root) for c in candidates)
    return f"{where}, but {found} has no entry whose source is {file} (missing record)"


def _route_of(path: Path, root: Path) -> str | None:
    """The route a ladder record was limited to (its ``extra.route``), or None: only a ladder record of one route
    named OP.ROUTE.DTYPE stands in for OP.DTYPE, not any file whose name has that shape."""
    data, _ = load_json(path, root)
    extra = data.get("extra") if isinstance(data, dict) else None
    return extra.get("route") if isinstance(extra, dict) else None


def _needs_another_gpu(file: str, name: str, root: Path) -> str | None:
    """The line saying why a claim cannot be met on the GPUs this project measures on, or None.

    A rung for another vendor's GPU (v15_rdna4_wmma: gfx1201 only) has no entry on the H200; the ladder
    still lists it in its record's ``not_timed`` with the reason it was skipped for the whole run
    ("skipped: requires amd gfx1201; this GPU is nvidia sm_90"). That record was written after the
    rung was tried, and says so where every reader of the record sees it: the claim is acknowledged,
    never counted as measured. A rung skipped for any other reason (a dtype, a failed check) is not.
    """
    stem = Path(file).stem
    for candidate in sorted((root / "records").glob(f"*/{name}.json")):
        data, _ = load_json(candidate, root)
        extra = data.get("extra") if isinstance(data, dict) else None
        not_timed = extra.get("not_timed") if isinstance(extra, dict) else None
        for entry in not_timed if isinstance(not_timed, list) else ():
            if (isinstance(entry, dict) and entry.get("variant") == stem and entry.get("shape") == "all"
                    and str(entry.get("reason", "")).startswith("skipped: requires ")):
                return (f"{file}: claims record {name!r}; {relative_name(candidate, root)} lists it as not "
                        f"measurable there ({entry['reason'].removeprefix('skipped: ')})")
    return None


def check_records(repo_root: Path, rules: SourceRules = PLAIN) -> CheckReport:
    """Parse every ``records/**/*.json``, validate the managed ones, find stale entries and unmet claims.

    ``rules`` says how files are hashed, which files a source runs (with ``sources_of``, an entry must
    list them all, and an entry whose source runs other files today than it did is stale) and what a
    claim looks like (without ``claims_in``, claims are not looked for).
    """
    root = Path(repo_root).resolve()
    report = CheckReport()
    records = root / "records"
    sources_now = _SourcesNow(root, rules)
    if records.is_dir():
        for path in sorted(records.rglob("*.json")):
            _check_one_record(path, root, rules, sources_now, report)
    if rules.claims_in is not None:
        for file, line, name in find_claims(root, rules.claims_in):
            problem = _claim_problem(file, line, name, root)
            elsewhere = _needs_another_gpu(file, name, root) if problem else None
            if elsewhere:
                report.elsewhere.append(elsewhere)
            elif problem:
                report.missing.append(problem)
    return report


# ------------------------------------------------------------------------------------------ output


def say(console, text: str, style: str | None = None) -> None:
    # Paths and messages contain brackets ("entries[2]"), so no rich markup and no guessing at highlights.
    console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


def render_check(report: CheckReport, console) -> None:
    """One line per finding, worst first, then a summary line."""
    for label, style, lines in (("ERROR", "bold red", report.errors), ("STALE", "bold yellow", report.stale),
                                ("MISSING", "bold red", report.missing)):
        for line in lines:
            say(console, f"{label} {line}", style)
    for line in report.elsewhere:
        say(console, f"ELSEWHERE {line}", "dim")
    if report.unmanaged:
        say(console, "unmanaged (no \"schema\" key; parsed, not validated): " + ", ".join(report.unmanaged), "dim")
    counts = (f"{report.ok_count} record(s) ok, {len(report.unmanaged)} unmanaged, {len(report.errors)} error(s), "
              f"{len(report.stale)} stale, {len(report.missing)} missing"
              + (f", {len(report.elsewhere)} for another GPU" if report.elsewhere else ""))
    if report.ok:
        say(console, f"records check: OK: {counts}", "green")
    else:
        say(console, f"records check: FAIL: {counts}", "bold red")
        if report.stale:
            say(console, "A stale entry describes code that has changed: measure it again and write a new record.")
