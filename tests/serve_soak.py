#!/usr/bin/env python3
# serve_soak.py — the soak of tests/cli_serve_soak.sh (issue 25): it starts `longctx serve` with
# SmolLM2 on a free loopback port, records the greedy answer of each valid request alone, then
# sends N mixed requests (default 2,000) over C concurrent connections (default 64): valid chat,
# completion and streamed requests, malformed JSON, wrong types, out-of-range and huge
# max_tokens, invalid UTF-8, bodies over the limit, a wrong key, unknown routes, slowloris-style
# partial headers or bodies that stall and give up, and clients that vanish mid-stream. Every
# request must get its own answer: the expected status and OpenAI error shape, and for a valid
# one exactly its solo answer (so nothing lost or mixed up). After the soak nothing is left
# running or waiting, the server answers as before, its resident memory is back near the
# baseline (not under ASan, whose quarantine holds freed memory; LeakSanitizer checks at exit
# instead), and SIGTERM ends it with status 0.
# Standard library only.
# Usage: serve_soak.py PATH/TO/longctx MODEL [N_REQUESTS] [CONCURRENCY] [--asan]
import http.client
import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time

from serve_common import http_request, metric_value, start_server

BIN, MODEL = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
CONC = int(sys.argv[4]) if len(sys.argv) > 4 else 64
ASAN = "--asan" in sys.argv
KEY = "soak-key"
FAILS = []
PASSES = 0
T0 = time.time()
lock = threading.Lock()


def check(name, got, want):
    global PASSES
    with lock:
        if got == want:
            PASSES += 1
        else:
            FAILS.append(name)
            if len(FAILS) <= 40:
                print(f"FAIL: {name}: got {got!r}, want {want!r} (at {time.time() - T0:.1f} s)",
                      file=sys.stderr)


srv, port, err_lines = start_server(
    [BIN, "serve", "-m", MODEL, "--device", "cpu", "-t", "2", "--port", "0", "--api-key", KEY,
     "--parallel", "4", "--queue", str(CONC + 8), "--ctx-max", "512", "--max-body", "65536",
     "--temp", "0"])
AUTH = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}


def request(method, path, body=None, headers=None, raw=None, timeout=300):
    return http_request(port, AUTH if headers is None else headers, method, path, body, raw,
                        timeout)[:3]


t0 = time.time()
while time.time() - t0 < 120:
    try:
        if request("GET", "/health", headers={})[0] == 200:
            break
    except OSError:
        pass
    time.sleep(0.2)


def rss_kb():
    with open(f"/proc/{srv.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def metric(name):
    return metric_value(request("GET", "/metrics", headers={})[2], name)


PROMPTS = ["Name a fruit.", "What is 2+2?", "Say hello in French.", "What color is the sky?",
           "Name a planet.", "What is the opposite of hot?", "Name a dog breed.",
           "What do bees make?"]
GEN = 5


def chat_body(p, **kw):
    b = {"messages": [{"role": "user", "content": p}], "temperature": 0, "max_tokens": GEN}
    b.update(kw)
    return b


def content_of(js):
    try:
        return js["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def text_of(js):
    try:
        return js["choices"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return None


# the solo answers, one request at a time
solo_chat, solo_comp = {}, {}
for p in PROMPTS:
    s, js, _ = request("POST", "/v1/chat/completions", chat_body(p))
    solo_chat[p] = content_of(js) if s == 200 else None
    s, js, _ = request("POST", "/v1/completions",
                       {"prompt": p, "temperature": 0, "max_tokens": GEN})
    solo_comp[p] = text_of(js) if s == 200 else None
check("solo answers", all(v is not None for v in list(solo_chat.values()) + list(solo_comp.values())),
      True)
# a request with max_tokens far beyond the context: generation runs to EOS or the context's end
s, js, _ = request("POST", "/v1/chat/completions", chat_body("What is 2+2?", max_tokens=10**9))
huge_ok = s == 200 and js["usage"]["completion_tokens"] <= 48
solo_huge = content_of(js) if huge_ok else None
if not huge_ok:
    print(f"serve_soak: the max_tokens 1e9 request ran {s} / {js and js.get('usage')}: "
          "its kind is left out (it must end at EOS soon to be cheap)", file=sys.stderr)
baseline = rss_kb()


def err_ok(name, s, js, status, param=None):
    check(name + ": status", s, status)
    e = (js or {}).get("error") or {}
    check(name + ": error shape", isinstance(e.get("message"), str) and "type" in e and "code" in e,
          True)
    if param is not None:
        check(name + ": param", e.get("param"), param)


def raw_socket_stall(partial, rng):
    """Slowloris: part of a request, a stall, then the client gives up."""
    sk = socket.create_connection(("127.0.0.1", port), timeout=30)
    sk.sendall(partial)
    time.sleep(rng.uniform(0.3, 1.5))
    sk.close()


def k_chat(rng):
    p = rng.choice(PROMPTS)
    s, js, _ = request("POST", "/v1/chat/completions", chat_body(p))
    check("chat: status", s, 200)
    check(f"chat answer = solo ({p})", content_of(js), solo_chat[p])


def k_completion(rng):
    p = rng.choice(PROMPTS)
    s, js, _ = request("POST", "/v1/completions", {"prompt": p, "temperature": 0, "max_tokens": GEN})
    check("completion: status", s, 200)
    check(f"completion answer = solo ({p})", text_of(js), solo_comp[p])


def k_stream(rng):
    p = rng.choice(PROMPTS)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(p, stream=True)).encode(),
              headers=AUTH)
    r = c.getresponse()
    check("stream: status", r.status, 200)
    parts, done = [], False
    for line in r.read().decode().split("\n"):
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            ev = json.loads(line[6:])
            if ev.get("choices"):
                parts.append(ev["choices"][0]["delta"].get("content", ""))
    c.close()
    check("stream: [DONE]", done, True)
    check(f"stream answer = solo ({p})", "".join(parts), solo_chat[p])


def k_huge_valid(rng):
    s, js, _ = request("POST", "/v1/chat/completions", chat_body("What is 2+2?", max_tokens=10**9))
    check("max_tokens 1e9: status", s, 200)
    check("max_tokens 1e9 answer = solo", content_of(js), solo_huge)


def k_vanish(rng):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = chat_body("Write a long story about a dragon.", stream=True, max_tokens=300)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=AUTH)
    r = c.getresponse()
    check("vanish: status", r.status, 200)
    if r.status != 200:
        r.read()
        c.close()
        return
    with lock:
        vanished[0] += 1
    got = []
    for _ in range(rng.randint(1, 3)):
        try:
            got.append(r.fp.readline())
        except OSError as e:
            raise OSError(f"{e} after reading {got!r}") from e
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def k_malformed(rng):
    raw = rng.choice([b'{"messages": [ {"role": }]}', b'{"messages": ', b'[1, 2', b'nul',
                      b'{"a": 1,,}', b'\x00\x01\x02'])
    s, js, _ = request("POST", "/v1/chat/completions", raw=raw)
    err_ok("malformed JSON", s, js, 400)


def k_wrong_type(rng):
    field, value = rng.choice([("temperature", "hot"), ("max_tokens", "x"), ("top_p", [1]),
                               ("stop", 5), ("seed", "s"), ("stream", "yes")])
    s, js, _ = request("POST", "/v1/chat/completions", chat_body("hi", **{field: value}))
    err_ok(f"wrong type {field}", s, js, 400, field)


def k_bad_messages(rng):
    msgs = rng.choice([[{"role": "user", "content": 7}], [{"role": "tool", "content": "x"}],
                       "hello", [], [{"content": "x"}]])
    s, js, _ = request("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 4})
    err_ok("bad messages", s, js, 400)


def k_huge_max_tokens(rng):
    s, js, _ = request("POST", "/v1/chat/completions", chat_body("hi", max_tokens=10**12))
    err_ok("max_tokens out of range", s, js, 400, "max_tokens")


def k_utf8(rng):
    raw = rng.choice([b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
                      b'{"messages": [{"role": "user", "content": "a\xc3"}]}',
                      b'{"prompt": "\xed\xa0\x80"}'])
    path = "/v1/completions" if b'"prompt"' in raw else "/v1/chat/completions"
    s, js, _ = request("POST", path, raw=raw)
    err_ok("invalid UTF-8", s, js, 400)


def k_too_large(rng):
    s, js, _ = request("POST", "/v1/chat/completions", raw=b'{"x": "' + b"a" * 70000 + b'"}')
    err_ok("body too large", s, js, 413)


def k_auth_route(rng):
    if rng.random() < 0.5:
        s, js, _ = request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
        err_ok("wrong key", s, js, 401)
    else:
        s, js, _ = request("GET", "/v1/" + rng.choice(["nothing", "chat", "../etc/passwd"]))
        err_ok("unknown route", s, js, 404)


def k_slowloris(rng):
    body = json.dumps(chat_body("hi")).encode()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
            KEY.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n\r\n")
    if rng.random() < 0.5:
        raw_socket_stall(head[:rng.randint(5, len(head) - 5)], rng)  # partial headers
    else:
        raw_socket_stall(head + body[:rng.randint(1, len(body) - 1)], rng)  # partial body
    with lock:
        global PASSES
        PASSES += 1


KINDS = [(k_chat, 16), (k_completion, 5), (k_stream, 8), (k_huge_valid, 2 if huge_ok else 0),
         (k_vanish, 8), (k_malformed, 10), (k_wrong_type, 10), (k_bad_messages, 6),
         (k_huge_max_tokens, 5), (k_utf8, 8), (k_too_large, 5), (k_auth_route, 7),
         (k_slowloris, 10)]
plan_rng = random.Random(2026)
plan = plan_rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS], k=N)
cancelled0 = metric("requests_cancelled_total")
next_i = 0
done_count = [0]
vanished = [0]  # streams that were admitted, then abandoned
exceptions = []


def worker(wid):
    global next_i
    rng = random.Random(wid)
    while True:
        with lock:
            if next_i >= N:
                return
            i = next_i
            next_i += 1
        try:
            plan[i](rng)
        except Exception as e:  # a lost response: the connection failed or timed out
            with lock:
                exceptions.append(f"request {i} ({plan[i].__name__}): {type(e).__name__}: {e}")
        with lock:
            done_count[0] += 1


t_start = time.time()
ths = [threading.Thread(target=worker, args=(w,)) for w in range(CONC)]
for t in ths:
    t.start()
last = 0
while any(t.is_alive() for t in ths):
    time.sleep(1)
    if time.time() - last >= 10:
        last = time.time()
        d = done_count[0]
        el = time.time() - t_start
        eta = (N - d) * el / d if d else 0
        try:
            state = f"running {metric('requests_running')}, waiting {metric('requests_waiting')}"
        except OSError:
            state = "metrics unavailable"
        print(f"serve_soak: {d}/{N} requests, {d / el:.1f}/s, ETA {eta:.0f} s ({state})",
              file=sys.stderr)
for t in ths:
    t.join()
elapsed = time.time() - t_start
check("no lost responses (exceptions)", exceptions[:5], [])
check("every request finished", done_count[0], N)
counts = {k.__name__: plan.count(k) for k, _ in KINDS}
print(f"serve_soak: {N} requests over {CONC} connections in {elapsed:.1f} s: {counts}",
      file=sys.stderr)

t0 = time.time()
while time.time() - t0 < 60 and (metric("requests_running") or metric("requests_waiting")):
    time.sleep(0.5)
check("after the soak: nothing running", metric("requests_running"), 0)
check("after the soak: nothing waiting", metric("requests_waiting"), 0)
t0 = time.time()  # (a cancelled entry leaves the queue, and is counted, at the engine's next look)
while time.time() - t0 < 20 and metric("requests_cancelled_total") - cancelled0 < vanished[0]:
    time.sleep(0.2)
check("after the soak: every vanished stream cancelled",
      metric("requests_cancelled_total") - cancelled0, vanished[0])
for p in PROMPTS[:3]:
    s, js, _ = request("POST", "/v1/chat/completions", chat_body(p))
    check(f"after the soak the same answer ({p})", content_of(js), solo_chat[p])
time.sleep(1)
after = rss_kb()
print(f"serve_soak: resident memory {baseline} kB before, {after} kB after", file=sys.stderr)
if not ASAN:
    # (glibc keeps some freed memory in the connection threads' arenas: 64 MB of slack)
    check(f"RSS back near baseline ({baseline} -> {after} kB)", after <= baseline + 65536, True)

srv.send_signal(signal.SIGTERM)
try:
    rc = srv.wait(timeout=60)
except subprocess.TimeoutExpired:
    srv.kill()
    rc = "hung"
check("SIGTERM: exit status (LeakSanitizer under ASan)", rc, 0)
if rc != 0 or FAILS:
    print("the server's last lines:\n" + "".join(err_lines[-40:]), file=sys.stderr)
print(f"serve_soak: {PASSES} passed, {len(FAILS)} failed")
sys.exit(1 if FAILS else 0)
