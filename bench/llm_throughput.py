"""LLM client throughput against a local OpenAI-compatible server with a fixed latency per request.

The ceiling of one worker process is max_concurrent / latency requests per second; the issue asks for at
least 80% of it. The server (tests/llm/llm_server.py) runs in its own process so that it does not share this
process's interpreter lock. Prints, per max_concurrent: requests, seconds, achieved req/s, the ceiling and
the ratio and the mean time a request took (the server's latency plus queueing on a loaded machine); then
the same through llm_quality_score_filter (prompt rendering and parsing included).

    python bench/llm_throughput.py [--latency 0.05] [--concurrency 8 16 32] [--seconds 3]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "llm"))


def _serve(latency: float, q) -> None:
    from llm_answers import scoring_answer
    from llm_server import LLMServer
    with LLMServer(scoring_answer, latency=latency) as srv:
        q.put(srv.url)
        while True:
            time.sleep(3600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--seconds", type=float, default=3.0, help="target length of each measurement")
    a = ap.parse_args()
    from gristmill.llm.client import ClientConfig, Counters, LLMClient
    from gristmill.registry import create_op

    q = mp.Queue()
    server = mp.Process(target=_serve, args=(a.latency, q), daemon=True)
    server.start()
    url = q.get(timeout=30)
    try:
        print(f"server latency {a.latency * 1000:.0f} ms; one worker process; cache in memory (every request new)")
        print(f"{'path':<28}{'max_concurrent':>15}{'requests':>10}{'seconds':>9}{'req/s':>9}{'ceiling':>9}{'ratio':>8}{'mean latency':>14}")
        for conc in a.concurrency:
            ceiling = conc / a.latency
            n = int(ceiling * a.seconds)
            client = LLMClient(ClientConfig(url=url + "/chat/completions", max_concurrent=conc))
            bodies = [{"model": "m", "messages": [{"role": "user", "content": f"bench {conc} {i} {time.time()}"}]}
                      for i in range(n)]
            c = Counters()
            t = time.perf_counter()
            out = client.post_many(bodies, counters=c)
            dt = time.perf_counter() - t
            assert all(o.error is None for o in out) and c.requests == n
            print(f"{'client.post_many':<28}{conc:>15}{n:>10}{dt:>9.2f}{n / dt:>9.0f}{ceiling:>9.0f}"
                  f"{n / dt / ceiling:>8.0%}{c.request_seconds / n * 1000:>11.1f} ms")
        for conc in a.concurrency:
            ceiling = conc / a.latency
            n = int(ceiling * a.seconds)
            stamp = time.time()
            rows = [{"text": f"Document {i} ({stamp}): the mill ground grain for the village."} for i in range(n)]
            op = create_op("llm_quality_score_filter", {"api_endpoint": url + "/chat/completions",
                                                        "api_or_hf_model": "m", "max_concurrent": conc})
            t = time.perf_counter()
            op.apply(rows)
            dt = time.perf_counter() - t
            counts = op.take_service_counts()
            reqs = counts["requests"]
            print(f"{'llm_quality_score_filter':<28}{conc:>15}{reqs:>10}{dt:>9.2f}{reqs / dt:>9.0f}{ceiling:>9.0f}"
                  f"{reqs / dt / ceiling:>8.0%}{counts['request_seconds'] / reqs * 1000:>11.1f} ms")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
