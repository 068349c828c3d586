"""human_preference_annotation_mapper (Data-Juicer's): send each sample (a prompt and two answers) to a Label Studio
server as a pairwise-comparison task and, with ``wait_for_annotations``, write the annotator's choice back:
``chosen_key`` gets the preferred answer, ``rejected_key`` the other. This op needs a service: a Label Studio
instance at ``api_url`` (or ``$LABEL_STUDIO_URL``) with an access token ``api_key`` (or
``$LABEL_STUDIO_API_KEY``). It speaks Label Studio's REST API directly (no SDK):

- ``POST /api/projects`` ``{title, description, label_config}`` once per worker process (unless ``project_id``
  names an existing project: set it when several workers run, else each creates its own project);
- ``POST /api/projects/<id>/import?return_task_ids=true`` with the tasks, ``max_tasks_per_batch`` per request;
  a task's data holds ``prompt``, ``answer1``, ``answer2`` and, as ``meta:<field>``, the sample's other scalar
  fields as strings (Data-Juicer's layout);
- with ``wait_for_annotations``, ``GET /api/tasks/<id>`` every ``poll_interval`` seconds until every task of the
  request has an annotation or ``timeout`` seconds passed; a task's first annotation whose result holds a
  ``pairwise`` item decides: ``selected: left`` → answer1 chosen, ``right`` → answer2 (any other value names the
  chosen field itself).

Every row passes through; ``chosen_key`` / ``rejected_key`` are null where no preference came back (Data-Juicer
fails on such a row when waiting). The label config is ``label_config`` when given, else the file
``label_config_file``, else a built-in pairwise view of ``$prompt``, ``$answer1``, ``$answer2``. Data-Juicer's
notification params are accepted and not used."""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..core import trust
from ..core.fused import StopRun
from ..registry import register
from .base import Mapper, Params

DEFAULT_LABEL_CONFIG = """<View>
  <Header value="Which answer is better?"/>
  <Text name="prompt" value="$prompt"/>
  <Pairwise name="preference" toName="answer1,answer2"/>
  <Text name="answer1" value="$answer1"/>
  <Text name="answer2" value="$answer2"/>
</View>"""


class LabelStudio:
    """The few Label Studio REST calls the op makes (token auth, JSON bodies)."""

    def __init__(self, url: str, key: str | None, timeout: float = 60.0):
        self.url, self.key, self.timeout = url.rstrip("/"), key, timeout

    def call(self, method: str, path: str, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Token {self.key}"} if self.key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            msg = f"Label Studio {method} {path}: HTTP {e.code} {e.read()[:200].decode('utf-8', 'replace')}"
            if e.code in (401, 403, 404):
                raise StopRun(msg) from None
            raise RuntimeError(msg) from None
        except (urllib.error.URLError, OSError) as e:
            raise StopRun(f"Label Studio at {self.url} cannot be reached: {getattr(e, 'reason', e)}") from None


@register("human_preference_annotation_mapper")
class HumanPreferenceAnnotationMapper(Mapper):
    """Create a Label Studio pairwise task per sample (prompt, answer1, answer2) and, when waiting for the
    annotations, write the preferred answer to ``chosen_key`` and the other to ``rejected_key``."""

    inputs = ("{prompt_key}", "{answer1_key}", "{answer2_key}")
    outputs = ("{chosen_key}", "{rejected_key}")

    class Params(Params):
        label_config_file: str | None = trust.path_param("read", None, description="File holding the Label Studio "
                                                         "label config XML.")
        answer1_key: str = Field("answer1", description="Field holding the first answer.")
        answer2_key: str = Field("answer2", description="Field holding the second answer.")
        prompt_key: str = Field("prompt", description="Field holding the prompt.")
        chosen_key: str = Field("chosen", description="Field receiving the preferred answer.")
        rejected_key: str = Field("rejected", description="Field receiving the other answer.")
        api_url: str | None = Field(None, description="Label Studio's base URL (default $LABEL_STUDIO_URL).")
        api_key: str | None = Field(None, description="Label Studio access token (default $LABEL_STUDIO_API_KEY).")
        label_config: str | None = Field(None, description="The label config XML itself.")
        project_name_prefix: str = Field("DataJuicer_Annotation", description="Prefix of a created project's title.")
        wait_for_annotations: bool = Field(False, description="Wait for the annotations and write them back.")
        timeout: int = Field(3600, ge=0, description="Seconds to wait for a request's tasks to be annotated.")
        poll_interval: float = Field(60, gt=0, description="Seconds between annotation checks.")
        samples_per_task: int = Field(1, description="Samples per task (Label Studio: always 1).")
        max_tasks_per_batch: int = Field(100, ge=1, description="Tasks per import request.")
        project_id: int | None = Field(None, description="An existing project to add the tasks to.")
        notification_config: dict | None = Field(None, description="Data-Juicer's notifications: not used.")
        notification_events: dict | None = Field(None, description="Data-Juicer's notifications: not used.")

    def __init__(self, **params):
        if params.get("text_key") is None:  # Data-Juicer: the text is the prompt
            params["text_key"] = params.get("prompt_key") or "prompt"
        super().__init__(**params)
        p = self.params
        self.api_url = p.api_url or os.environ.get("LABEL_STUDIO_URL")
        if not self.api_url:
            raise ValueError("human_preference_annotation_mapper: set api_url (or $LABEL_STUDIO_URL) to a Label Studio "
                             "server")
        pol = trust.current()
        if pol.restricted or not pol.allow_private_urls:
            trust.check_url(self.api_url, f"{self.name}.api_url", pol)
        if p.label_config:
            self.label_config = p.label_config
        elif p.label_config_file and os.path.exists(p.label_config_file):
            with open(p.label_config_file, encoding="utf-8") as f:
                self.label_config = f.read().strip()
        else:
            self.label_config = DEFAULT_LABEL_CONFIG

    def config(self) -> dict:
        cfg = super().config()
        cfg["params"] = {k: v for k, v in cfg["params"].items() if k != "api_key"}
        return cfg

    def _client(self) -> LabelStudio:
        return self.resource("client", lambda: LabelStudio(
            self.api_url, self.params.api_key or os.environ.get("LABEL_STUDIO_API_KEY")))

    def _project(self) -> int:
        def create():
            if self.params.project_id is not None:
                return self.params.project_id
            import uuid
            title = f"{self.params.project_name_prefix}_{uuid.uuid4().hex[:6]}"
            return int(self._client().call("POST", "/api/projects", {
                "title": title, "description": "Created by gristmill", "label_config": self.label_config})["id"])
        return self.resource("project", create)

    def task(self, row: dict) -> dict:
        p = self.params
        data = {"prompt": row.get(p.prompt_key, "No prompt provided"),
                "answer1": row.get(p.answer1_key, "No answer 1 provided"),
                "answer2": row.get(p.answer2_key, "No answer 2 provided")}
        for k, v in row.items():
            if k not in (p.prompt_key, p.answer1_key, p.answer2_key) and (v is None or isinstance(v, (str, int, float,
                                                                                                         bool))):
                data[f"meta:{k}"] = "" if v is None else str(v)
        return {"data": data}

    def preference(self, annotation: dict | None) -> str | None:
        p = self.params
        for item in (annotation or {}).get("result") or []:
            if item.get("type") == "pairwise":
                sel = (item.get("value") or {}).get("selected")
                if sel:
                    return p.answer1_key if sel == "left" else p.answer2_key if sel == "right" else sel
        return None

    def _wait(self, task_ids: list[int]) -> dict[int, dict]:
        p, client = self.params, self._client()
        done: dict[int, dict] = {}
        deadline = time.monotonic() + p.timeout
        while True:
            for t in task_ids:
                if t not in done:
                    anns = (client.call("GET", f"/api/tasks/{t}") or {}).get("annotations") or []
                    if anns:
                        done[t] = anns[0]
            if len(done) == len(task_ids) or time.monotonic() + p.poll_interval > deadline:
                return done
            time.sleep(p.poll_interval)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        rows = C.to_pylist(batch)
        chosen: list = [None] * len(rows)
        rejected: list = [None] * len(rows)
        if rows:
            client, project = self._client(), self._project()
            for s in range(0, len(rows), p.max_tasks_per_batch):
                part = rows[s:s + p.max_tasks_per_batch]
                resp = client.call("POST", f"/api/projects/{project}/import?return_task_ids=true",
                                   [self.task(r) for r in part])
                ids = list((resp or {}).get("task_ids") or [])
                if len(ids) != len(part):
                    raise RuntimeError(f"Label Studio import returned {len(ids)} task ids for {len(part)} tasks")
                if not p.wait_for_annotations:
                    continue
                anns = self._wait(ids)
                for i, t in enumerate(ids):
                    pref = self.preference(anns.get(t))
                    if pref is None:
                        continue
                    other = p.answer2_key if pref == p.answer1_key else p.answer1_key
                    chosen[s + i], rejected[s + i] = part[i].get(pref), part[i].get(other)
        return C.set_column(C.set_column(batch, p.chosen_key, pa.array(chosen, pa.string())),
                            p.rejected_key, pa.array(rejected, pa.string()))
