"""Errors a user sees, written to be read: what went wrong, where, and what was expected."""

from __future__ import annotations

import re
from dataclasses import dataclass


class HelloGpuError(Exception):
    """Base class for every error hello-gpu raises on purpose."""


class KernelArgumentError(HelloGpuError, ValueError):
    """A kernel call was refused before launch. The message names the parameter."""


class LaunchConfigError(KernelArgumentError):
    """block, grid, shared_mem or stream is outside what the device or kernel allows."""


class NoGpuError(HelloGpuError, RuntimeError):
    """A GPU is needed for this and none is visible."""


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int | None
    column: int | None      # 1-based, where the compiler said
    severity: str           # "error", "warning", "note", "catastrophic error"
    message: str


# NVRTC: "kernel.hip(3): error: identifier "x" is undefined"
_NVRTC_LINE = re.compile(r"^(?P<file>[^\s()][^()]*)\((?P<line>\d+)\): (?P<severity>[a-z ]+?): (?P<message>.*)$")
# clang/hipRTC: "kernel.hip:3:12: error: use of undeclared identifier 'x'"
_CLANG_LINE = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<column>\d+): (?P<severity>[a-z ]+?): (?P<message>.*)$")


def parse_diagnostics(log: str) -> list[Diagnostic]:
    """Read NVRTC's or clang's diagnostics. NVRTC echoes the line with a caret: use it as column."""
    diagnostics: list[Diagnostic] = []
    lines = log.splitlines()
    for index, text in enumerate(lines):
        match = _CLANG_LINE.match(text)
        if match:
            diagnostics.append(Diagnostic(match["file"], int(match["line"]), int(match["column"]),
                                          match["severity"], match["message"].strip()))
            continue
        match = _NVRTC_LINE.match(text)
        if match:
            column = None
            # NVRTC prints the offending line indented by two spaces, then a caret line.
            if index + 2 < len(lines) and lines[index + 2].strip() == "^":
                column = len(lines[index + 2]) - len(lines[index + 2].lstrip()) - 1
            diagnostics.append(Diagnostic(match["file"], int(match["line"]), column,
                                          match["severity"], match["message"].strip()))
    return diagnostics


def render_diagnostic(diagnostic: Diagnostic, source_lines: list[str], file_name: str) -> str:
    """``file:line:col: error: message`` then the user's line and a caret under the column."""
    where = diagnostic.file
    if diagnostic.line is not None:
        where += f":{diagnostic.line}"
        if diagnostic.column is not None:
            where += f":{diagnostic.column}"
    text = f"{where}: {diagnostic.severity}: {diagnostic.message}"
    if diagnostic.file == file_name and diagnostic.line and 1 <= diagnostic.line <= len(source_lines):
        code = source_lines[diagnostic.line - 1].rstrip("\n").expandtabs(4)
        gutter = f"{diagnostic.line:>5} | "
        text += f"\n{gutter}{code}"
        if diagnostic.column is not None:
            text += "\n" + " " * (len(gutter) - 2) + "| " + " " * max(diagnostic.column - 1, 0) + "^"
    return text


class CompileError(HelloGpuError):
    """The compiler rejected the source. ``str()`` shows each error at the user's own line."""

    def __init__(self, file_name: str, source: str, log: str, compiler: str, command: str = ""):
        self.file_name = file_name
        self.source = source
        self.log = log
        self.compiler = compiler
        self.command = command
        self.diagnostics = parse_diagnostics(log)
        self.notes: list[str] = []
        super().__init__(self.render())

    def add_note_line(self, note: str) -> None:
        """Append a line to the message (e.g. which target a GPU-less check compiled for)."""
        self.notes.append(note)
        self.args = (self.render(),)

    def __str__(self) -> str:
        return self.args[0] if self.args else self.render()

    def render(self) -> str:
        source_lines = self.source.splitlines()
        shown = [d for d in self.diagnostics if d.severity != "note" or d.file == self.file_name]
        notes = "".join(f"\n{note}" for note in getattr(self, "notes", ()))
        if not shown:
            return f"{self.compiler} failed to compile {self.file_name}:\n{self.log.strip()}{notes}"
        body = "\n".join(render_diagnostic(d, source_lines, self.file_name) for d in shown)
        errors = sum(1 for d in shown if "error" in d.severity)
        return f"{self.compiler} found {errors} error(s) in {self.file_name}:\n{body}{notes}"
