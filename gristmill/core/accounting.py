"""Row accounting shared by readers, ops and engines: what was rejected, and per-op counts."""
from __future__ import annotations

from dataclasses import dataclass, field

REASON = "__reason__"  # column of removed rows saying why each was removed


@dataclass
class OpCounts:
    """Row accounting for one op: rows_in + added = rows_out + removed + rejected."""

    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0
    rejected: int = 0
    added: int = 0  # net rows created by expanding mappers / groupers (negative when merged)
    file_errors: int = 0  # whole-file read problems (truncated, unreadable): rejects that are not rows
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)
    service: dict[str, float] = field(default_factory=dict)
    """Counts of an op that calls a service (an LLM endpoint: requests, retries, failures, tokens), summed."""

    def merge(self, other: "OpCounts") -> None:
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.removed += other.removed
        self.rejected += other.rejected
        self.added += other.added
        self.file_errors += other.file_errors
        self.seconds += other.seconds
        for k, v in other.reasons.items():
            self.reasons[k] = self.reasons.get(k, 0) + v
        for k, v in other.service.items():
            self.service[k] = self.service.get(k, 0) + v

    def to_dict(self) -> dict:
        return {"rows_in": self.rows_in, "rows_out": self.rows_out, "removed": self.removed,
                "rejected": self.rejected, "added": self.added, "file_errors": self.file_errors,
                "seconds": round(self.seconds, 6),
                "reasons": dict(sorted(self.reasons.items())),
                **({"service": {k: round(v, 6) if isinstance(v, float) else v
                                for k, v in self.service.items()}} if self.service else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "OpCounts":
        return cls(**{**d, "reasons": dict(d.get("reasons", {})), "service": dict(d.get("service", {}))})


@dataclass
class Reject:
    """A row an op could not process (or a record a reader could not parse)."""

    op: str
    error_type: str
    message: str
    row: dict | None = None
    source: str | None = None
    offset: int | None = None
    line: int | None = None
    position: int | None = None  # the op's index in the recipe
    counts_as_row: bool = True  # False for a whole-file problem (truncated, unreadable): no row behind it

    def to_dict(self) -> dict:
        d = {"op": self.op, "position": self.position, "error_type": self.error_type, "message": self.message, "source": self.source,
             "offset": self.offset, "line": self.line, "record": self.row}
        if not self.counts_as_row:
            d["file_error"] = True
        return d
