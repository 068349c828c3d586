"""human_preference_annotation_mapper against a small Label Studio stand-in (the REST calls the op makes: create a
project, import tasks with their ids, read a task's annotations): tasks laid out as Data-Juicer lays them out,
preferences written back, rows without an annotation kept with nulls, errors that stop the run."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


class FakeLabelStudio:
    def __init__(self, choose=None, token="tok"):
        self.projects, self.tasks, self.calls = {}, {}, []
        self.choose = choose or (lambda task: None)  # task data → "left" / "right" / None
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                raw = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _auth(self):
                if self.headers.get("Authorization") != f"Token {token}":
                    self._send(401, {"detail": "bad token"})
                    return False
                return True

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                srv.calls.append(("POST", self.path, body))
                if not self._auth():
                    return
                if self.path == "/api/projects":
                    pid = len(srv.projects) + 1
                    srv.projects[pid] = body
                    return self._send(201, {"id": pid, **body})
                if self.path.startswith("/api/projects/") and "/import" in self.path:
                    ids = []
                    for t in body:
                        tid = 100 + len(srv.tasks)
                        sel = srv.choose(t["data"])
                        anns = [{"id": tid, "result": [{"type": "pairwise", "value": {"selected": sel}}]}] if sel else []
                        srv.tasks[tid] = {"id": tid, "data": t["data"], "annotations": anns}
                        ids.append(tid)
                    return self._send(201, {"task_count": len(ids), "task_ids": ids})
                self._send(404, {"detail": "no route"})

            def do_GET(self):
                srv.calls.append(("GET", self.path, None))
                if not self._auth():
                    return
                tid = int(self.path.rsplit("/", 1)[1])
                self._send(200, srv.tasks[tid]) if tid in srv.tasks else self._send(404, {"detail": "no task"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ls():
    srv = FakeLabelStudio(choose=lambda d: {"q1": "left", "q2": "right"}.get(d["prompt"]))
    yield srv
    srv.close()


ROWS = [{"id": 1, "prompt": "q1", "answer1": "A1", "answer2": "B1", "score": 0.5},
        {"id": 2, "prompt": "q2", "answer1": "A2", "answer2": "B2", "score": None},
        {"id": 3, "prompt": "q3", "answer1": "A3", "answer2": "B3", "score": 2}]


def run(rows, **params):
    import pyarrow as pa
    res = FusedOp([create_op("human_preference_annotation_mapper", params)]).run_batch(pa.RecordBatch.from_pylist(rows))
    return res.batch.to_pylist(), res.rejects


def test_tasks_and_preferences(ls):
    out, rej = run(ROWS, api_url=ls.url, api_key="tok", wait_for_annotations=True, poll_interval=0.01, timeout=0,
                   max_tasks_per_batch=2)
    assert not rej
    assert [(r["chosen"], r["rejected"]) for r in out] == [("A1", "B1"), ("B2", "A2"), (None, None)]
    assert [{k: v for k, v in r.items() if k not in ("chosen", "rejected")} for r in out] == ROWS
    posts = [c for c in ls.calls if c[0] == "POST"]
    assert posts[0][1] == "/api/projects" and posts[0][2]["title"].startswith("DataJuicer_Annotation_")
    assert "<Pairwise" in posts[0][2]["label_config"]
    assert [c[1] for c in posts[1:]] == ["/api/projects/1/import?return_task_ids=true"] * 2  # 2 + 1 tasks
    assert posts[1][2][0] == {"data": {"prompt": "q1", "answer1": "A1", "answer2": "B1", "meta:id": "1",
                                       "meta:score": "0.5"}}
    assert posts[1][2][1]["data"]["meta:score"] == ""


def test_no_wait_existing_project_custom_keys(ls, tmp_path):
    cfg = tmp_path / "ui.xml"
    cfg.write_text("<View><Text name='q' value='$prompt'/></View>")
    rows = [{"question": "q1", "x": "A", "y": "B"}]
    out, rej = run(rows, api_url=ls.url, api_key="tok", project_id=7, prompt_key="question", answer1_key="x",
                   answer2_key="y", chosen_key="c", rejected_key="r")
    assert not rej and out == [{"question": "q1", "x": "A", "y": "B", "c": None, "r": None}]
    assert [c[1] for c in ls.calls] == ["/api/projects/7/import?return_task_ids=true"]
    assert ls.calls[0][2] == [{"data": {"prompt": "q1", "answer1": "A", "answer2": "B"}}]
    op = create_op("human_preference_annotation_mapper", {"api_url": ls.url, "label_config_file": str(cfg)})
    assert op.label_config == "<View><Text name='q' value='$prompt'/></View>" and op.text_key == "prompt"


def test_errors(ls, monkeypatch):
    from gristmill.core.fused import StopRun
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    with pytest.raises(Exception, match="set api_url"):
        create_op("human_preference_annotation_mapper", {})
    with pytest.raises(StopRun, match="HTTP 401"):
        run(ROWS[:1], api_url=ls.url, api_key="wrong")
    with pytest.raises(StopRun, match="cannot be reached"):
        run(ROWS[:1], api_url="http://127.0.0.1:9", api_key="tok")
