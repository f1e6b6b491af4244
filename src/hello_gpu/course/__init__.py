"""The course: its outline (docs/course/outline.json) and what is generated from it (docs/architecture.md:
the course layer sits above agent and below the faces; it imports no PyTorch)."""

from .outline import (
    BEGIN,
    END,
    OUTLINE,
    OutlineError,
    Problem,
    chapter_heading,
    check_pages,
    first_heading,
    load_outline,
    render_en,
    render_region,
    render_zh,
    sync,
    validate,
)

__all__ = ["BEGIN", "END", "OUTLINE", "OutlineError", "Problem", "chapter_heading", "check_pages", "first_heading",
           "load_outline", "render_en", "render_region", "render_zh", "sync", "validate"]
