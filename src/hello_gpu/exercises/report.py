"""ExerciseReport: what exercise() checked, what failed, the paired ratios, the hints, and what was not checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from .hints import BY_KEY


@dataclass
class Case:
    """One checked case (from the checker's CaseResult), or a guard-bytes probe."""

    shape: str
    dtype: str
    seed: int | None
    distribution: str | None
    reason: str = ""

    @staticmethod
    def of(case, reason: str | None = None) -> "Case":
        return Case(case.shape, case.dtype, case.seed, case.distribution, case.reason if reason is None else reason)


@dataclass
class Timing:
    """Your kernel paired with one rung: ``speedup`` = its time / yours (> 1: yours is faster)."""

    against: str
    speedup: float
    ci95: tuple[float, float]
    verdict: str
    their_median_s: float


@dataclass
class Finding:
    """A hint of the table (:mod:`.hints`), with what was observed and how sure it is."""

    key: str
    confidence: str          # "observed", "likely" or "possible" (see hints.py)
    evidence: str

    @property
    def rule(self):
        return BY_KEY[self.key]


@dataclass
class ExerciseReport:
    op: str
    route: str
    kernel: str
    gpu: str | None = None                     # the GPU's name; None: no GPU here
    device: str | None = None                  # where the checked tensors lived ("cuda", "cpu")
    stages: list = field(default_factory=list)               # (stage, "pass"/"FAIL", detail)
    compile_errors: list[str] = field(default_factory=list)
    passed_cases: list[Case] = field(default_factory=list)
    failures: list[Case] = field(default_factory=list)
    seeds: tuple = ()
    checks: list[str] = field(default_factory=list)
    timings: list[Timing] = field(default_factory=list)
    median_s: float | None = None
    gb_per_s: float | None = None
    bench_shape: str | None = None
    findings: list[Finding] = field(default_factory=list)
    not_checked: list = field(default_factory=list)          # (what, why)
    notes: list[str] = field(default_factory=list)
    library_calls: list[str] = field(default_factory=list)   # the work done by torch or a library (own_work)

    @property
    def passed(self) -> bool | None:
        """True: every case ran and passed; False: something failed, or the work was done by torch or a
        library instead of the kernel (``library_calls``); None: nothing could be run here (a HIP kernel
        without a GPU that compiled: see ``not_checked``)."""
        if self.compile_errors or self.failures or self.library_calls:
            return False
        return True if self.passed_cases else None

    @property
    def status(self) -> str:
        return {True: "PASS", False: "FAIL", None: "COMPILED ONLY"}[self.passed]

    def ratio(self, against: str) -> Timing | None:
        return next((timing for timing in self.timings if timing.against == against), None)

    def hint_keys(self) -> list[str]:
        return [finding.key for finding in self.findings]

    # ------------------------------------------------------------------ rendering
    def _summary_rows(self) -> list[tuple[str, str]]:
        where = f"GPU {self.gpu}" if self.gpu else ("CPU (Triton interpreter)" if self.device == "cpu" else "CPU, no GPU")
        rows = [("result", self.status), ("where", where)]
        rows += [(stage, f"{state} ({detail})") for stage, state, detail in self.stages]
        rows += [("own work", f"FAIL ({reason})") for reason in self.library_calls]
        if self.passed_cases or self.failures:
            shapes = sorted({case.shape for case in self.passed_cases + self.failures}, key=lambda s: (len(s), s))
            dtypes = sorted({case.dtype for case in self.passed_cases + self.failures})
            rows.append(("cases", f"{len(self.passed_cases)} passed, {len(self.failures)} failed; shapes "
                                  f"{', '.join(shapes)}; {', '.join(dtypes)}; seeds {', '.join(map(str, self.seeds))}"))
        if self.checks:
            rows.append(("checks", ", ".join(self.checks)))
        if self.median_s is not None:
            rate = f", {self.gb_per_s:.0f} GB/s" if self.gb_per_s else ""
            rows.append(("your time", f"{self.median_s * 1e6:.1f} us at {self.bench_shape}{rate}"))
        return rows

    def _failure_rows(self, limit: int = 8) -> list[tuple[str, ...]]:
        return [(case.shape, case.dtype, str(case.distribution), str(case.seed) if case.seed is not None else "-",
                 case.reason[:300]) for case in self.failures[:limit]]

    def _timing_rows(self) -> list[tuple[str, ...]]:
        return [(t.against, f"{t.speedup:.2f}x", f"[{t.ci95[0]:.2f}, {t.ci95[1]:.2f}]", t.verdict,
                 f"{t.their_median_s * 1e6:.1f} us") for t in self.timings]

    def _hint_rows(self) -> list[tuple[str, ...]]:
        return [(f.key, f.confidence, f.evidence, f"{f.rule.cause}. {f.rule.advice}") for f in self.findings]

    def __rich__(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text
        parts = []
        style = {"PASS": "bold green", "FAIL": "bold red"}.get(self.status, "bold yellow")
        head = Table(title=Text(f"exercise {self.op} ({self.route}): {self.kernel}  {self.status}", style=style),
                     show_header=False, title_justify="left")
        head.add_column(style="bold")
        head.add_column(overflow="fold")
        for key, value in self._summary_rows():
            head.add_row(key, Text(value))
        parts.append(head)
        for error in self.compile_errors[:5]:
            parts.append(Text(error, style="red"))
        for title, columns, rows in (
                (f"failed cases ({len(self.failures)})", ("shape", "dtype", "inputs", "seed", "why"), self._failure_rows()),
                ("paired with the ladder at the same shape (their time / yours: > 1 means yours is faster)",
                 ("rung", "ratio", "95% CI", "verdict", "their median"), self._timing_rows()),
                ("hints", ("hint", "how sure", "observed", "usual cause; what to try"), self._hint_rows()),
                ("not checked", ("what", "why"), [tuple(item) for item in self.not_checked])):
            if not rows:
                continue
            table = Table(title=title, title_justify="left")
            for column in columns:
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(*(Text(cell) for cell in row))
            parts.append(table)
        parts += [Text(f"note: {note}", style="dim") for note in self.notes]
        return Group(*parts)

    def _console(self, width: int = 120):
        from rich.console import Console
        console = Console(record=True, width=width, file=_Discard(), force_terminal=False, color_system=None)
        console.print(self)
        return console

    def __str__(self) -> str:
        return self._console().export_text()

    def _repr_html_(self) -> str:
        from rich.console import Console
        console = Console(record=True, width=120, file=_Discard(), force_jupyter=False)
        console.print(self)
        return console.export_html(inline_styles=True, code_format="<pre style=\"font-family:monospace\">{code}</pre>")

    def _repr_markdown_(self) -> str:
        def table(columns, rows) -> list[str]:
            escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")    # noqa: E731
            return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
                    + ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows] + [""])
        lines = [f"**exercise {self.op} ({self.route}): `{self.kernel}`: {self.status}**", ""]
        lines += table(("", ""), self._summary_rows())
        lines += [f"    {line}" for error in self.compile_errors[:5] for line in error.splitlines()] + [""]
        if self.failures:
            lines += table(("shape", "dtype", "inputs", "seed", "why"), self._failure_rows())
        if self.timings:
            lines += table(("rung", "their time / yours", "95% CI", "verdict", "their median"), self._timing_rows())
        if self.findings:
            lines += table(("hint", "how sure", "observed", "usual cause; what to try"), self._hint_rows())
        if self.not_checked:
            lines += table(("not checked", "why"), self.not_checked)
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
