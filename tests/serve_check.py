#!/usr/bin/env python3
# serve_check.py — the checks of tests/cli_serve.sh against a running `longctx serve` (issue 25):
# it starts the server on a free loopback port with SmolLM2 and an API key, waits for /health,
# and checks the routes, greedy answers against `longctx run`, streaming (SSE, usage chunk,
# [DONE]), stop strings, logprobs, OpenAI-shaped errors with their status codes, 8 concurrent
# greedy requests against their solo answers, a queue that overflows (503 + Retry-After),
# clients that disconnect mid-stream (cancelled, the server goes on), tokenize/detokenize,
# /metrics, the official openai client (when importable), and SIGTERM during a stream (exit 0).
# Standard library only, besides the optional openai package.
# Usage: serve_check.py PATH/TO/longctx MODEL
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from serve_common import http_request, metric_value, start_server

BIN, MODEL = sys.argv[1], sys.argv[2]
KEY = "test-key-123"
FAILS = []
PASSES = 0


def check(name, got, want):
    global PASSES
    if got == want:
        PASSES += 1
    else:
        FAILS.append(name)
        print(f"FAIL: {name}: got {got!r}, want {want!r}", file=sys.stderr)


def truth(name, cond, detail=""):
    check(name + (f" ({detail})" if detail and not cond else ""), bool(cond), True)


srv, port, err_lines = start_server(
    [BIN, "serve", "-m", MODEL, "--device", "cpu", "-t", "2", "--port", "0", "--api-key", KEY,
     "--parallel", "4", "--queue", "8", "--ctx-max", "512", "--max-body", "65536", "--temp", "0"])
AUTH = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}


def request(method, path, body=None, headers=None, raw=None, timeout=120):
    return http_request(port, AUTH if headers is None else headers, method, path, body, raw,
                        timeout)


# /health: 503 while loading, then 200
t0 = time.time()
status = None
while time.time() - t0 < 60:
    try:
        status, js, _, _ = request("GET", "/health", headers={})
        if status == 200:
            break
    except OSError:
        pass
    time.sleep(0.1)
check("/health", (status, js), (200, {"status": "ok"}))

s, js, _, _ = request("GET", "/v1/models")
check("/v1/models status", s, 200)
MODEL_ID = js["data"][0]["id"] if js and js.get("data") else None
check("/v1/models id", MODEL_ID, os.path.basename(MODEL)[:-5])


def chat(content, **kw):
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": content}],
            "temperature": 0, "max_tokens": 16}
    body.update(kw)
    return request("POST", "/v1/chat/completions", body)


def run_cli(prompt, chat_mode=True, n=16):
    args = [BIN, "run", "-m", MODEL, "--device", "cpu", "-t", "2", "--temp", "0",
            "--repeat-penalty", "1", "-n", str(n), "-p", prompt]
    if chat_mode:
        args.append("--chat")
    out = subprocess.run(args, capture_output=True, text=True).stdout
    return out[:-1] if out.endswith("\n") else out


def sse(path, body):
    """POST a streamed request: the decoded events (dicts) and whether [DONE] ended it."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(body).encode(), headers=AUTH)
    r = c.getresponse()
    events, done, after_done = [], False, False
    for line in r.read().decode().split("\n"):
        if not line.startswith("data: "):
            continue
        if done:
            after_done = True
        if line == "data: [DONE]":
            done = True
        else:
            events.append(json.loads(line[6:]))
    c.close()
    return r.status, r.getheader("Content-Type"), events, done and not after_done


# ---- greedy answers equal `longctx run`'s ------------------------------------------------------
Q = "What is the capital of France?"
s, js, _, _ = chat(Q)
check("chat status", s, 200)
answer = js["choices"][0]["message"]["content"]
check("chat = run --chat --temp 0 -n 16", answer, run_cli(Q))
check("chat object", js["object"], "chat.completion")
check("chat role", js["choices"][0]["message"]["role"], "assistant")
u = js["usage"]
truth("chat usage", u["prompt_tokens"] > 10 and 0 < u["completion_tokens"] <= 16 and
      u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], str(u))
check("chat finish_reason", js["choices"][0]["finish_reason"],
      "length" if u["completion_tokens"] == 16 else "stop")

st, ctype, evs, done = sse("/v1/chat/completions",
                           {"messages": [{"role": "user", "content": Q}], "temperature": 0,
                            "max_tokens": 16, "stream": True,
                            "stream_options": {"include_usage": True}})
check("stream status", st, 200)
check("stream content type", ctype, "text/event-stream")
check("stream ends with [DONE]", done, True)
text = "".join(e["choices"][0]["delta"].get("content", "") for e in evs if e.get("choices"))
check("stream text = non-streamed", text, answer)
check("stream first delta has the role", evs[0]["choices"][0]["delta"].get("role"), "assistant")
check("stream last chunk: usage, no choices", (evs[-1]["choices"], evs[-1]["usage"]), ([], u))
check("stream finish chunk", evs[-2]["choices"][0]["finish_reason"],
      js["choices"][0]["finish_reason"])
check("stream chunk object", evs[1]["object"], "chat.completion.chunk")

P = "The three primary colors are"
s, js, _, _ = request("POST", "/v1/completions", {"prompt": P, "temperature": 0, "max_tokens": 16})
check("completion status", s, 200)
ctext = js["choices"][0]["text"] if s == 200 else None
check("completion = run --temp 0 -n 16", ctext, run_cli(P, chat_mode=False))
check("completion object", js and js["object"], "text_completion")
st, _, evs, done = sse("/v1/completions", {"prompt": P, "temperature": 0, "max_tokens": 16,
                                           "stream": True})
check("completion stream = non-streamed",
      "".join(e["choices"][0]["text"] for e in evs if e.get("choices")), ctext)
check("completion stream [DONE]", done, True)
check("completion stream: no usage chunk unless asked", any("usage" in e for e in evs), False)

# ---- stop strings ------------------------------------------------------------------------------
cut = answer.find(" Paris")
if cut > 0:
    for stop in (" Paris", [" Paris", "zzz"]):
        s, js, _, _ = chat(Q, stop=stop)
        check(f"stop {stop!r}: text", js["choices"][0]["message"]["content"], answer[:cut])
        check(f"stop {stop!r}: finish_reason", js["choices"][0]["finish_reason"], "stop")
    st, _, evs, _ = sse("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": Q}], "temperature": 0,
                         "max_tokens": 16, "stream": True, "stop": " Paris"})
    check("stop, streamed", "".join(e["choices"][0]["delta"].get("content", "") for e in evs),
          answer[:cut])
else:
    truth("the answer names Paris (for the stop test)", False, answer)

# ---- logprobs ------------------------------------------------------------------------------------
s, js, _, _ = chat(Q, logprobs=True, top_logprobs=3, max_tokens=6)
lp = js["choices"][0]["logprobs"]["content"] if s == 200 else []
check("logprobs: one entry a token", len(lp), js["usage"]["completion_tokens"] if s == 200 else -1)
truth("logprobs: greedy token is the top one, logprob <= 0",
      all(e["token"] == e["top_logprobs"][0]["token"] and e["logprob"] <= 1e-6 and
          len(e["top_logprobs"]) == 3 and
          abs(e["logprob"] - e["top_logprobs"][0]["logprob"]) < 1e-4 for e in lp), str(lp[:1]))
check("logprobs: the tokens spell the text", "".join(e["token"] for e in lp),
      js["choices"][0]["message"]["content"])

# ---- errors: OpenAI's shape and status codes ---------------------------------------------------


def expect_error(name, status, param, resp):
    s, js, text, r = resp
    check(name + ": status", s, status)
    e = (js or {}).get("error") or {}
    truth(name + ": error shape", isinstance(e.get("message"), str) and "type" in e and
          "param" in e and "code" in e, text[:200])
    if param is not None:
        check(name + ": param", e.get("param"), param)
    return e.get("message", ""), r


msg, _ = expect_error("malformed JSON", 400, None,
                      request("POST", "/v1/chat/completions", raw=b'{"messages": [\n  {"role": }]}'))
truth("malformed JSON: line and column", "line 2" in msg and "column" in msg, msg)
expect_error("wrong type", 400, "temperature", chat(Q, temperature="hot"))
expect_error("out of range", 400, "top_p", chat(Q, top_p=1.5))
expect_error("wrong type in messages", 400, "messages[0].content",
             request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": 7}]}))
expect_error("bad role", 400, "messages[0].role",
             request("POST", "/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]}))
expect_error("missing messages", 400, "messages", request("POST", "/v1/chat/completions", {}))
expect_error("n = 2", 400, "n", chat(Q, n=2))
expect_error("presence_penalty", 400, "presence_penalty", chat(Q, presence_penalty=0.5))
expect_error("frequency_penalty", 400, "frequency_penalty", chat(Q, frequency_penalty=0.5))
expect_error("tools", 400, "tools", chat(Q, tools=[{"type": "function", "function": {"name": "f"}}]))
expect_error("too many stops", 400, "stop", chat(Q, stop=["a"] * 65))
check("harmless fields ignored (user, presence_penalty 0)",
      chat(Q, user="u1", presence_penalty=0, metadata={"a": "b"})[0], 200)
msg, _ = expect_error("unknown model", 404, "model", chat(Q, model="gpt-4"))
expect_error("no API key", 401, None,
             request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": Q}]},
                     headers={"Content-Type": "application/json"}))
expect_error("wrong API key", 401, None,
             request("GET", "/v1/models", headers={"Authorization": "Bearer nope"}))
long_prompt = "word " * 700
msg, _ = expect_error("prompt beyond capacity", 400, "messages", chat(long_prompt))
truth("prompt beyond capacity: both numbers", "512" in msg and re.search(r"\b7\d\d\b", msg), msg)
expect_error("body too large", 413, None,
             request("POST", "/v1/chat/completions", raw=b'{"x": "' + b"a" * 70000 + b'"}'))
msg, _ = expect_error("invalid UTF-8", 400, None,
                      request("POST", "/v1/chat/completions",
                              raw=b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}'))
expect_error("unknown route", 404, None, request("GET", "/v1/nothing"))

# ---- tokenize / detokenize ---------------------------------------------------------------------
s, js, _, _ = request("POST", "/tokenize", {"content": "Hello world"})
toks = js.get("tokens") if js else None
check("tokenize", s == 200 and isinstance(toks, list) and len(toks) >= 2, True)
s, js, _, _ = request("POST", "/detokenize", {"tokens": toks or []})
check("detokenize round trip", js and js.get("content"), "Hello world")
expect_error("tokenize wrong type", 400, "content", request("POST", "/tokenize", {"content": 3}))

# ---- 8 concurrent greedy requests = their solo answers -----------------------------------------
prompts = ["Name a fruit.", "What is 2+2?", "Say hello in French.", "What color is the sky?",
           "Name a planet.", "What is the opposite of hot?", "Name a dog breed.",
           "What do bees make?"]
solo = {}
for p in prompts:
    s, js, _, _ = chat(p, max_tokens=12)
    solo[p] = js["choices"][0]["message"]["content"] if s == 200 else None
together = {}


def worker(p):
    s, js, _, _ = chat(p, max_tokens=12)
    together[p] = js["choices"][0]["message"]["content"] if s == 200 else f"status {s}"


ths = [threading.Thread(target=worker, args=(p,)) for p in prompts]
for t in ths:
    t.start()
for t in ths:
    t.join()
for p in prompts:
    check(f"concurrent = solo: {p}", together.get(p), solo[p])


def metric(name):
    return metric_value(request("GET", "/metrics", headers={})[2], name)


# ---- a full queue: 503 + Retry-After; clients that disconnect are cancelled --------------------
cancelled0 = metric("requests_cancelled_total")
socks, statuses, retry = [], [], []
big = {"messages": [{"role": "user", "content": "Write a long story about a dragon."}],
       "max_tokens": 400, "stream": True, "temperature": 0}
for i in range(14):  # 4 running + 8 waiting fit; the rest are refused
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/chat/completions", body=json.dumps(big).encode(), headers=AUTH)
    r = c.getresponse()
    statuses.append(r.status)
    if r.status == 200:
        r.fp.readline()  # the first event: admitted to the queue
        socks.append((c, r))
    else:
        retry.append(r.getheader("Retry-After"))
        body = json.loads(r.read())
        check("queue full: error code", body["error"]["code"], "queue_full")
        c.close()
    time.sleep(0.05)
check("queue full: 12 accepted", statuses.count(200), 12)
check("queue full: the rest 503", statuses.count(503), 2)
check("queue full: Retry-After", retry, ["1", "1"])
t0 = time.time()  # the engine admits the first 4 at its next step boundary (slow under ASan)
while time.time() - t0 < 30 and metric("requests_running") != 4:
    time.sleep(0.2)
truth("metrics: running and waiting", metric("requests_running") == 4 and
      metric("requests_waiting") == 8, f"{metric('requests_running')} {metric('requests_waiting')}")
for c, r in socks:  # every client goes away mid-stream
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
t0 = time.time()
while time.time() - t0 < 20 and (metric("requests_running") or metric("requests_waiting")):
    time.sleep(0.2)
check("disconnects: nothing left running", metric("requests_running"), 0)
check("disconnects: nothing left waiting", metric("requests_waiting"), 0)
check("disconnects: 12 cancelled", metric("requests_cancelled_total") - cancelled0, 12)
s, js, _, _ = chat(Q)
check("after the disconnects the server answers the same", s == 200 and
      js["choices"][0]["message"]["content"], answer)

# a non-streamed client that goes away is cancelled too
c0 = metric("requests_cancelled_total")
sk = socket.create_connection(("127.0.0.1", port))
body = json.dumps(big | {"stream": False}).encode()
sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
           KEY.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
           str(len(body)).encode() + b"\r\n\r\n" + body)
time.sleep(1.0)
sk.close()
t0 = time.time()
while time.time() - t0 < 10 and metric("requests_cancelled_total") == c0:
    time.sleep(0.2)
check("non-streamed disconnect cancelled", metric("requests_cancelled_total") - c0, 1)

_, _, mtext, _ = request("GET", "/metrics", headers={})
for name in ("longctx_time_to_first_token_seconds_bucket", "longctx_time_per_output_token_seconds_count",
             "longctx_e2e_request_latency_seconds_sum", "longctx_kv_tokens_total 2048",
             "longctx_prompt_tokens_total", "longctx_generation_tokens_total",
             'longctx_kv_pages{tier="host",state="total"}',
             'longctx_kv_slot_cache_slabs{state="per_layer"} 0',
             'longctx_kv_slot_cache_lookups_total{result="hit"} 0',
             'longctx_kv_host_to_gpu_bytes_total{what="slabs"} 0', "longctx_working_set_bytes 0",
             "longctx_requests_held 0"):
    check(f"metrics has {name}", name in mtext, True)

# ---- the official openai client ------------------------------------------------------------------
try:
    import openai
except ImportError:
    openai = None
    print("serve_check: the openai package is not installed: its checks are skipped")
if openai:
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    r = cl.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": Q}],
                                   temperature=0, max_tokens=16)
    check("openai: chat", r.choices[0].message.content, answer)
    check("openai: usage", r.usage.completion_tokens, u["completion_tokens"])
    r = cl.completions.create(model=MODEL_ID, prompt=P, temperature=0, max_tokens=16)
    check("openai: completion", r.choices[0].text, ctext)
    parts, usage = [], None
    for ch in cl.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": Q}],
                                         temperature=0, max_tokens=16, stream=True,
                                         stream_options={"include_usage": True}):
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
        if ch.usage:
            usage = ch.usage
    check("openai: stream", "".join(parts), answer)
    check("openai: stream usage", usage and usage.completion_tokens, u["completion_tokens"])
    if cut > 0:
        r = cl.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": Q}],
                                       temperature=0, max_tokens=16, stop=[" Paris"])
        check("openai: stop", (r.choices[0].message.content, r.choices[0].finish_reason),
              (answer[:cut], "stop"))
    try:
        cl.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": Q}], n=2)
        check("openai: n=2 raises BadRequestError", "no error", "BadRequestError")
    except openai.BadRequestError as e:
        check("openai: BadRequestError param", e.body.get("param") if isinstance(e.body, dict)
              else None, "n")
    try:
        openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong",
                      max_retries=0).models.list()
        check("openai: wrong key raises AuthenticationError", "no error", "AuthenticationError")
    except openai.AuthenticationError:
        check("openai: AuthenticationError", True, True)
    try:
        cl.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": Q}])
        check("openai: unknown model raises NotFoundError", "no error", "NotFoundError")
    except openai.NotFoundError:
        check("openai: NotFoundError", True, True)

# ---- SIGTERM: a clean exit, a stream in flight ends with an error event and [DONE] -------------
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/v1/completions", headers=AUTH,
          body=json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "stream": True}).encode())
r = c.getresponse()
r.readline()  # (chunk-aware: the first event)
srv.send_signal(signal.SIGTERM)
rest = r.read().decode()
c.close()
check("SIGTERM: the stream in flight ends with an error and [DONE]",
      '"error"' in rest and rest.endswith("data: [DONE]\n\n"), True)
try:
    rc = srv.wait(timeout=20)
except subprocess.TimeoutExpired:
    srv.kill()
    rc = "timeout"
check("SIGTERM: exit status", rc, 0)
time.sleep(0.2)
sanitizer = [l for l in err_lines if "Sanitizer" in l or "runtime error" in l or "LeakSanitizer" in l]
check("no sanitizer report", sanitizer, [])
print(f"serve_check: {PASSES} passed, {len(FAILS)} failed")
if FAILS:
    print("".join(err_lines[-20:]), file=sys.stderr)
sys.exit(1 if FAILS else 0)
