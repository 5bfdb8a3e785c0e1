# serve_common.py — what tests/serve_check.py and tests/serve_soak.py share: starting
# `longctx serve` on a free loopback port (its stderr kept), one HTTP request, and reading a
# gauge or counter from /metrics. Standard library only.
import http.client
import json
import re
import subprocess
import sys
import threading


def start_server(cmd):
    """Start `cmd` (a `longctx serve ... --port 0` command line) and wait for its listening
    line: (process, port, the list its stderr lines go on being appended to). Exits 1 when the
    server does not start."""
    srv = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    err_lines, port = [], None
    for line in srv.stderr:
        err_lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("FAIL: the server did not start:\n" + "".join(err_lines), file=sys.stderr)
        sys.exit(1)
    threading.Thread(target=lambda: err_lines.extend(srv.stderr), daemon=True).start()
    return srv, port, err_lines


def http_request(port, headers, method, path, body=None, raw=None, timeout=120):
    """One request on a fresh connection: (status, the body as JSON or None, the body's text,
    the response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        js = json.loads(text)
    except ValueError:
        js = None
    return r.status, js, text, r


def metric_value(metrics_text, name):
    """The value of longctx_NAME in a /metrics text (None when absent)."""
    m = re.search(r"^longctx_" + name + r" (\d+)$", metrics_text, re.M)
    return int(m.group(1)) if m else None
