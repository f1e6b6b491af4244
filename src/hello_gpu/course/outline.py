"""The course's outline, docs/course/outline.json: the one source of chapter numbers, titles, files and status.

``hello-gpu course sync`` validates it, writes the table of contents between the markers
``<!-- hello-gpu:outline -->`` / ``<!-- /hello-gpu:outline -->`` of README.md (English, short) and
README.zh-CN.md (Chinese: 章节名 | 简介 | 状态), and checks that every written chapter's page exists and
starts with the H1 the outline gives it ("第 N 章 <title>", appendices "附录 X <title>"). The site's
navigation (docs/.vitepress/config.mjs) reads the same file. ``hello-gpu records tables`` regenerates the same
regions (marker kind ``outline``). Nothing here imports PyTorch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..bench.records import RecordError

OUTLINE = Path("docs/course/outline.json")
READMES = {"en": Path("README.md"), "zh": Path("README.zh-CN.md")}
BEGIN = "<!-- hello-gpu:outline -->"
END = "<!-- /hello-gpu:outline -->"
STATUSES = ("written", "planned")


@dataclass(frozen=True)
class Problem:
    """One drift: ``kind`` is "outline" (the file itself), "readme" (a table out of date or its markers
    missing), "missing" (a written chapter without its page) or "heading" (a page's H1 is not the outline's)."""
    kind: str
    message: str

    def __str__(self) -> str:
        return self.message


class OutlineError(ValueError):
    """The outline cannot be read or is invalid; the message names every problem."""


def load_outline(root: Path) -> dict:
    path = Path(root) / OUTLINE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise OutlineError(f"{OUTLINE}: {error}") from error


def chapters(outline: dict) -> list[tuple[dict, dict]]:
    """(part, chapter) for every chapter, in order."""
    return [(part, chapter) for part in outline.get("parts", []) for chapter in part.get("chapters", [])]


def chapter_heading(chapter: dict) -> str:
    """The H1 a chapter's page starts with: "第 8 章 Element-Wise：向量加法", "附录 A HIP、CUDA 与 Triton 对照"."""
    number = chapter["number"]
    return f"第 {number} 章 {chapter['title']}" if isinstance(number, int) else f"附录 {number} {chapter['title']}"


def validate(outline: dict) -> list[Problem]:
    """Every problem of the outline itself: unique numbers, files under docs/course/, a known status, an
    issue for each planned chapter."""
    problems: list[str] = []
    if not isinstance(outline.get("parts"), list) or not outline["parts"]:
        return [Problem("outline", f"{OUTLINE}: no parts")]
    seen_numbers: dict[object, str] = {}
    seen_files: set[str] = set()
    for part_index, part in enumerate(outline["parts"]):
        if not part.get("title") or not isinstance(part.get("chapters"), list):
            problems.append(f"part {part_index}: needs a title and a list of chapters")
            continue
        for chapter in part["chapters"]:
            number = chapter.get("number")
            where = f"chapter {number!r}"
            if not (isinstance(number, int) and not isinstance(number, bool) and number >= 0) and not (
                    isinstance(number, str) and re.fullmatch(r"[A-Z]", number)):
                problems.append(f"{where}: the number must be a whole number or a capital letter (appendix)")
            elif number in seen_numbers:
                problems.append(f"{where}: number used twice (also {seen_numbers[number]!r})")
            else:
                seen_numbers[number] = chapter.get("title", "")
            for key in ("title", "summary", "file"):
                if not isinstance(chapter.get(key), str) or not chapter[key].strip():
                    problems.append(f"{where}: no {key}")
            file = chapter.get("file")
            if isinstance(file, str) and file:
                parts = Path(file).parts
                if not file.startswith("course/") or not file.endswith(".md") or ".." in parts or file.startswith("/"):
                    problems.append(f"{where}: file {file!r} must be a .md page under docs/course/ (written as course/...)")
                elif file in seen_files:
                    problems.append(f"{where}: file {file!r} used twice")
                seen_files.add(file)
            status = chapter.get("status")
            if status not in STATUSES:
                problems.append(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
            if status == "planned" and not (isinstance(chapter.get("issue"), int) and chapter["issue"] > 0):
                problems.append(f"{where}: a planned chapter names the issue that brings it (\"issue\": N)")
    return [Problem("outline", f"{OUTLINE}: {problem}") for problem in problems]


def _page_link(chapter: dict) -> str:
    return f"docs/{chapter['file']}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_zh(outline: dict) -> str:
    """The Chinese table of contents: one 章节名 | 简介 | 状态 table per part."""
    lines: list[str] = []
    for part in outline["parts"]:
        lines += ["", f"**{part['title']}**", "", "| 章节名 | 简介 | 状态 |", "|---|---|---|"]
        for chapter in part["chapters"]:
            heading = _cell(chapter_heading(chapter))
            if chapter["status"] == "written":
                name, status = f"[{heading}]({_page_link(chapter)})", "已完成"
            else:
                name, status = heading, f"计划中（#{chapter['issue']}）"
            lines.append(f"| {name} | {_cell(chapter['summary'])} | {status} |")
    return "\n".join(lines + [""])


def render_en(outline: dict) -> str:
    """The English table of contents: chapter numbers, the (Chinese) titles linked where written, status."""
    lines = ["", "| part | chapter | title (in Chinese) | status |", "|---|---|---|---|"]
    for index, part in enumerate(outline["parts"]):
        label = "appendix" if all(isinstance(c["number"], str) for c in part["chapters"]) else str(index)
        for chapter in part["chapters"]:
            title = _cell(chapter["title"])
            if chapter["status"] == "written":
                title, status = f"[{title}]({_page_link(chapter)})", "written"
            else:
                status = f"planned (#{chapter['issue']})"
            lines.append(f"| {label} | {chapter['number']} | {title} | {status} |")
    return "\n".join(lines + [""])


RENDERERS = {"en": render_en, "zh": render_zh}


def render_region(arguments: list[str], root: Path, where: str) -> str:
    """The ``outline`` marker kind for ``hello-gpu records tables`` (which regenerates every marked region of
    the READMEs): the same table ``sync`` writes. The language is the argument (``zh`` or ``en``), else the
    file's: Chinese in README.zh-CN.md, English elsewhere."""
    language = arguments[0] if arguments else ("zh" if where.startswith(str(READMES["zh"]) + ":") else "en")
    if language not in RENDERERS:
        raise RecordError(f"{where}: outline language {language!r} is not one of {', '.join(RENDERERS)}")
    try:
        outline = load_outline(root)
    except OutlineError as error:
        raise RecordError(f"{where}: {error}") from None
    problems = validate(outline)
    if problems:
        raise RecordError("\n".join(f"{where}: {problem}" for problem in problems))
    return RENDERERS[language](outline).strip("\n")


def replace_region(text: str, body: str, where: str) -> str:
    """``text`` with what lies between the outline markers replaced by ``body``."""
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < 0 or end < begin or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise OutlineError(f"{where}: needs exactly one {BEGIN} ... {END} region")
    return text[:begin + len(BEGIN)] + "\n\n" + body.strip("\n") + "\n\n" + text[end:]


def first_heading(text: str) -> str | None:
    """The first H1 of a Markdown page (``# ...``, outside front matter and code fences), or None."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    fence = None
    for line in lines[start:]:
        stripped = line.strip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif stripped.startswith(fence) and not stripped.strip("`~"):
                fence = None
            continue
        if fence is None and re.match(r"# \S", line):
            return line[2:].strip()
    return None


def check_pages(outline: dict, root: Path) -> list[Problem]:
    """A written chapter's page must exist under docs/ and start with the outline's H1."""
    problems = []
    for _, chapter in chapters(outline):
        if chapter.get("status") != "written":
            continue
        page = Path(root) / "docs" / chapter["file"]
        expected = chapter_heading(chapter)
        if not page.is_file():
            problems.append(Problem("missing", f"docs/{chapter['file']}: chapter {chapter['number']} is written in the "
                                               f"outline but its page does not exist"))
            continue
        found = first_heading(page.read_text(encoding="utf-8"))
        if found != expected:
            problems.append(Problem("heading", f"docs/{chapter['file']}: the first H1 is {found!r}, the outline says "
                                               f"{expected!r}"))
    return problems


def sync(root: Path, check: bool = False) -> tuple[list[Path], list[Problem]]:
    """Write (or with ``check``, compare) both READMEs' tables of contents and check the pages.

    Returns (README files changed or, with ``check``, out of date; every problem, drift included). An
    invalid outline writes nothing."""
    root = Path(root)
    outline = load_outline(root)
    problems = validate(outline)
    if problems:
        return [], problems
    changed = []
    for language, name in READMES.items():
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
            new = replace_region(text, RENDERERS[language](outline), str(name))
        except OSError as error:
            problems.append(Problem("readme", f"{name}: {error}"))
            continue
        except OutlineError as error:
            problems.append(Problem("readme", str(error)))
            continue
        if new != text:
            changed.append(path)
            if check:
                problems.append(Problem("readme", f"{name}: the course table is out of date with {OUTLINE} "
                                                  f"(run hello-gpu course sync)"))
            else:
                path.write_text(new, encoding="utf-8")
    return changed, problems + check_pages(outline, root)
