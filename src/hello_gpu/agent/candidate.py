"""A candidate kernel and the states it passes through on its way to being accepted or rejected."""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import asdict, dataclass, field

# proposed -> compiled -> correct -> timed -> accepted, or one of the ends on the right.
STATES = ("proposed", "compiled", "correct", "timed", "accepted",
          "compile-failed", "incorrect", "rejected", "suspect", "crashed")
FINAL_STATES = ("accepted", "compile-failed", "incorrect", "rejected", "suspect", "crashed")


@dataclass
class Candidate:
    """One attempt. ``source`` is a whole rung file (``.hip`` or Triton ``.py``); ``companion`` the
    ``vNN_name.py`` launcher of a HIP rung when it has one."""

    id: int | None                      # the store assigns it
    parent_id: int | None               # None for the starting rung
    route: str                          # "hip" or "triton"
    source: str
    companion: str | None = None
    action: str = ""                    # what the policy did, e.g. "num_warps 4 -> 8"
    hypothesis: str = ""                # why it should be faster, with the predicted effect
    state: str = "proposed"
    reason: str = ""                    # why it ended where it did (the evidence in results)
    results: dict = field(default_factory=dict)     # tool name -> that tool's JSON output

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"unknown candidate state {self.state!r}; known: {', '.join(STATES)}")
        if self.route not in ("hip", "triton"):
            raise ValueError(f"route must be hip or triton, got {self.route!r}")

    @property
    def source_sha256(self) -> str:
        text = self.source + ("\0" + self.companion if self.companion else "")
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def diff_from(self, parent: "Candidate | None") -> str:
        """A unified diff of the source against the parent's ("" for the first candidate)."""
        if parent is None:
            return ""
        return "".join(difflib.unified_diff(parent.source.splitlines(keepends=True),
                                            self.source.splitlines(keepends=True),
                                            fromfile=f"candidate {parent.id}", tofile=f"candidate {self.id}"))

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> "Candidate":
        return Candidate(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)
