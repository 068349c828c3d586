"""Errors of the pipeline as data: what went wrong, where in the recipe, what to do, and the exit status
every face maps it to (the CLI prints it, REST and MCP send it as ``{path, message}``)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

# exit statuses (the CLI's, also a job's): refused before any work, failed while running, interrupted
REFUSED, FAILED, SIGINT, SIGTERM = 2, 1, 130, 143

_LOCATED = re.compile(r"^(?:[^:\n]+\.ya?ml|recipe): (?P<path>[A-Za-z_][\w.\[\]]*): (?P<msg>.+)$", re.S)


@dataclass
class PipelineError(Exception):
    message: str
    path: str = ""
    """The YAML path of the problem (``process[2].words_num_filter.min_nm``), when there is one."""
    hint: str = ""
    """What to do about it (``rerun the same command to resume``)."""
    status: int = REFUSED

    def __str__(self) -> str:
        return self.message + (f"; {self.hint}" if self.hint else "")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PipelineError":
        return cls(**{k: d.get(k, v) for k, v in (("message", ""), ("path", ""), ("hint", ""),
                                                    ("status", REFUSED))})

    @classmethod
    def refused(cls, e: BaseException) -> "PipelineError":
        """A refusal before any work from an exception whose message may start ``FILE: yaml.path: ...``."""
        msg = str(e)
        m = _LOCATED.match(msg)
        return cls(msg, path=m["path"] if m else "", status=REFUSED)
