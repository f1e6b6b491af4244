"""Records: every measurement as a small, checked JSON file, and the tables in the docs made from them.

A figure in a README is only worth what its trail is worth: which kernel source, which commit, which
GPU and clocks, how many samples, what interval. So a measurement is written once, as a record under
``records/<device-slug>/<name>.json``, and every table in the docs is generated from records, never typed.
``docs/records.md`` is the course text for all of this (in Chinese); this docstring is the reference.

Schema ``hello-gpu/record/1``
----------------------------

::

    {"schema": "hello-gpu/record/1",
     "name": str,                      # the file name without .json: [A-Za-z0-9._-]+
     "kind": str,                      # "ladder", "benchmark", "reference-check", "ceilings", ...
     "created": str,                   # ISO-8601 in UTC: "2025-06-01T12:00:00Z"
     "device": {"slug": str, "name": str, "arch": str},   # "nvidia-h200", "NVIDIA H200", "sm_90"
     "environment": dict,              # environment_manifest(); must hold git.commit;
                                       # may hold clocks_start / clocks_end
     "ceilings": dict,                 # optional: {"copy_bytes_per_s": float,
                                       #            "matmul_flops_per_s": {"bfloat16": float, ...}}
     "entries": [{
         "variant": str, "role": "candidate" | "baseline",
         "source": {"path": str, "sha256": str} | null,   # repo-relative posix path, sha256 of its
                                                          # measured bytes; null for library baselines
         "sources": [{"path": str, "sha256": str}, ...],  # optional: the source first, then every file
                                                          # it runs (a rung's companion, parents, headers)
         "shape": str, "dtype": str,
         "correctness": {"passed": bool, ...evidence} | null,   # max_abs_error, seeds, checks, ...
         "timing": {"median": s > 0, "p20", "p80", "minimum", "maximum",   # seconds (Summary.to_dict)
                    "ci95": [lo, hi],          # lo <= median <= hi
                    "count": int > 0, "relative_standard_error": float | null,
                    "cache": "cold" | "cold-clean" | "warm", "graph": bool, "clock": "device-events" | "wall"},
         "work": {"bytes": float, "flops": float, "dtype": str | null,            # Work.to_dict(); the split
                  "read_bytes": float, "written_bytes": float} | null,              # only where stated
         "derived": {"gb_per_s", "tflop_per_s", ..., "suspect": str | null} | null, # Rates.to_dict()
         "speedups": {"<baseline variant>": {"value": float, "ci95": [lo, hi], "pairs": int,
                                             "verdict": "faster" | "slower" | "within noise"}},  # optional
         "extra": dict,                # optional, free-form
     }],
     "extra": dict}                    # optional, free-form

The schema is ``record.schema.json`` (JSON Schema, validated with the jsonschema library); the rules
it cannot state are small functions in :mod:`.schema`. Records stay small: raw samples belong in the
Measurement object, so a non-empty ``timing.samples`` is rejected. Unknown keys are rejected too (a
typo such as ``"medain"`` must not pass as a record); free-form data goes in ``extra``. Files are
strict JSON: NaN and Infinity are rejected anywhere.

JSON files under ``records/`` without a ``"schema"`` key predate this schema. They are *unmanaged*:
listed, parsed, never validated, never an error.

bench knows no rung-file format. How a file is hashed, which files a source runs and what a claim
looks like come in as a :class:`SourceRules` (``hello_gpu.ops.sources.record_rules()`` gives the
repository's: a rung's header prose and ``hello-gpu:`` directive lines are not hashed, a rung's
sources are everything it loads, imports or includes); the defaults hash whole files and know no
sources beyond the source itself, and no claims.

Checks (``hello-gpu records check``)
------------------------------------

* every managed record validates and lives at ``records/<device.slug>/<name>.json``;
* every file an entry was measured with (its ``sources``) still exists and still has the recorded
  sha256, else the entry is STALE: the code changed after it was measured, so its figures describe
  code that is gone. The finding names the file. With ``sources_of``, an entry without ``sources``
  (measured before records listed them) is stale too, and so is one whose source runs other files
  today than it did when measured;
* every *claim* is met. A source file under ``src/``, ``examples/`` or ``benchmarks/`` claims a record
  with a comment line of its own, ``//`` or ``#`` then ``hello-gpu: record NAME``. Some
  ``records/*/NAME.json`` must then exist with an entry whose ``source.path`` is that file.

Tables (``hello-gpu records tables``)
-------------------------------------

In Markdown, the region between ``<!-- hello-gpu:table records/nvidia-h200/NAME.json [columns=...] -->``
and ``<!-- /hello-gpu:table -->`` is generated by :func:`render_table`; other kinds of region
(``<!-- hello-gpu:KIND ... -->``) by the renderers handed to :func:`update_tables`. Markers inside
fenced code blocks are examples, not tables, and are left alone. A table whose record does not exist is an
error, unless its marker says ``pending=ladder``: then it shows a "not yet measured" box naming the command
that writes the record (:func:`.tables.render_missing_record`).

The package: :mod:`.schema` (validation), :mod:`.store` (names, hashing, building, writing),
:mod:`.staleness` (``records check``), :mod:`.tables` (tables and generated regions).
"""

from .schema import CACHES, CLOCKS, ROLES, SCHEMA, SCHEMA_FILE, VERDICTS, RecordError, record_schema, validate_record
from .staleness import CheckReport, check_records, entry_findings, find_claims, render_check
from .store import (PLAIN, SourceRules, default_records_dir, device_from_manifest, device_slug, entry_sources,
                    file_sha256, load_json, new_record, record_path, record_text, repository_root, source_changes,
                    source_entries, source_entry, timing_from_summary, utc_now, write_record)
from .tables import (BUILT_IN_RENDERERS, DEFAULT_COLUMNS, Renderer, default_table_files, format_figure, regenerate,
                     render_table, render_tables, update_tables)

__all__ = ["BUILT_IN_RENDERERS", "CACHES", "CLOCKS", "DEFAULT_COLUMNS", "PLAIN", "ROLES", "SCHEMA", "SCHEMA_FILE",
           "VERDICTS", "CheckReport", "RecordError", "Renderer", "SourceRules", "check_records", "default_records_dir",
           "default_table_files", "device_from_manifest", "device_slug", "entry_findings", "entry_sources", "file_sha256",
           "find_claims", "format_figure", "load_json", "new_record", "record_path", "record_schema", "record_text",
           "regenerate", "render_check", "render_table", "render_tables", "repository_root", "source_changes",
           "source_entries", "source_entry", "timing_from_summary", "update_tables", "utc_now", "validate_record",
           "write_record"]
