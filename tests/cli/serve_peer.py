#!/usr/bin/env python3
"""serve_peer.py — the misbehaving server of tests/cli/test_serve.sh.

    python3 tests/cli/serve_peer.py --mode MODE --port-file F [--upstream URL] [--die-after N]
                                    [--model F.gguf] [--kvverify PATH]

Listens on 127.0.0.1 (a free port, written to F once it listens). GET
/v1/models and /props are forwarded to --upstream when given (else a model
list of one "peer" model and a 404). The completion endpoints (/completion,
/v1/completions) answer as MODE says:

  reset       the connection is reset (RST) before any answer
  http500     HTTP 500 with a text body;  http404: HTTP 404
  notjson     HTTP 200, a body that is not JSON
  nologprobs  HTTP 200, JSON without logprobs
  hang        no answer for 600 s
  proxy       forwarded to --upstream; with --die-after N the process exits
              (the server dies mid-run) on the completion request after N
  legacy      forwarded to --upstream's /completion, answered in the legacy
              OpenAI form (choices[0].logprobs tokens "token_id:N",
              token_logprobs, top_logprobs {token: logprob}), as vLLM with
              return_tokens_as_token_ids does
  shiftids    forwarded, every token id in the answer moved by one (a server
              that serves another model with the same vocabulary size)
  ref         answered by `kvverify run` on --model (kvverify's reference
              engine: greedy ids, then a teacher-forced pass for the
              logprobs), in llama-server's form: a server that is the
              reference, one request at a time
"""
import argparse
import json
import math
import os
import socket
import subprocess
import struct
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

A = None
count = {"n": 0}


def forward(path, body=None):
    req = urllib.request.Request(A.upstream + path, data=body,
                                 headers={"Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read()


def run_json(args):
    out = subprocess.run([A.kvverify, "run", A.model] + args + ["--json", "-"],
                         check=True, capture_output=True).stdout
    return json.loads(out)


def ref_answer(q):
    ids = [int(t) for t in q["prompt"]]
    n = int(q.get("n_predict", q.get("max_tokens", 16)))
    k = int(q.get("n_probs", 5))
    gen = run_json(["--tokens", ",".join(map(str, ids)), "-n", str(n)])["generated_tokens"]
    seq = ids + gen[:-1]
    rows = run_json(["--tokens", ",".join(map(str, seq)), "--teacher", "--all-logits"])["logits_all"]
    probs = []
    for s, tok in enumerate(gen):
        row = rows[len(ids) - 1 + s]
        mx = max(row)
        lse = mx + math.log(sum(math.exp(x - mx) for x in row))
        lp = [x - lse for x in row]
        top = sorted(range(len(row)), key=lambda i: (-lp[i], i))[:k]
        probs.append({"id": tok, "logprob": lp[tok],
                      "top_logprobs": [{"id": i, "logprob": lp[i]} for i in top]})
    # the text holds a NUL, as llama-server's does on a byte-fallback vocabulary
    return {"content": "\x00", "tokens": gen, "tokens_cached": 0,
            "timings": {"prompt_n": len(ids), "cache_n": 0}, "completion_probabilities": probs}


def legacy(ans, n_probs):
    probs = ans["completion_probabilities"]
    tops = []
    for p in probs:
        tops.append({"token_id:%d" % t["id"]: t["logprob"] for t in p["top_logprobs"][:n_probs]})
    return {"object": "text_completion", "model": "peer",
            "choices": [{"index": 0, "text": ans.get("content", ""), "finish_reason": "length",
                         "logprobs": {"tokens": ["token_id:%d" % p["id"] for p in probs],
                                      "token_logprobs": [p["logprob"] for p in probs],
                                      "top_logprobs": tops, "text_offset": [0] * len(probs)}}],
            "usage": {"prompt_tokens_details": {"cached_tokens": ans.get("tokens_cached", 0)}}}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/json"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if A.upstream:
            try:
                st, b = forward(self.path)
                return self.send(st, b)
            except urllib.error.HTTPError as e:
                return self.send(e.code, e.read())
        if self.path == "/v1/models":
            return self.send(200, json.dumps({"object": "list", "data": [{"id": "peer"}]}))
        self.send(404, "not found", "text/plain")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        m = A.mode
        if m == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if m == "http500":
            return self.send(500, "internal error: out of slots", "text/plain")
        if m == "http404":
            return self.send(404, "no such endpoint", "text/plain")
        if m == "notjson":
            return self.send(200, "<html>this is not json</html>", "text/html")
        if m == "nologprobs":
            return self.send(200, json.dumps({"content": "Once", "tokens": [1]}))
        if m == "hang":
            time.sleep(600)
            return
        count["n"] += 1
        if A.die_after is not None and count["n"] > A.die_after:
            os._exit(3)  # the server dies: the connection closes unanswered
        q = json.loads(body)
        if m == "ref":
            return self.send(200, json.dumps(ref_answer(q)))
        if m == "legacy":
            k = q.get("logprobs", 5)
            q = dict(q, n_predict=q.get("max_tokens", 16), n_probs=k)
            st, b = forward("/completion", json.dumps(q).encode())
            return self.send(st, json.dumps(legacy(json.loads(b), k)))
        st, b = forward(self.path, body)
        if m == "shiftids":
            ans = json.loads(b)
            for p in ans.get("completion_probabilities", []):
                p["id"] = (p["id"] + 1) % 512
                for t in p["top_logprobs"]:
                    t["id"] = (t["id"] + 1) % 512
            b = json.dumps(ans).encode()
        self.send(st, b)


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--upstream")
    ap.add_argument("--die-after", type=int)
    ap.add_argument("--model")
    ap.add_argument("--kvverify", default="./kvverify")
    A = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    tmp = A.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, A.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
