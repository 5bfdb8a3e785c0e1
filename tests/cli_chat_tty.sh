#!/usr/bin/env bash
# cli_chat_tty.sh — `longctx chat` on a terminal (issue 26): a pseudo-terminal drives it as a
# person would: a question answered, Ctrl-C at the prompt gives a fresh prompt and the program
# goes on, the up arrow recalls the last line (with libedit: the build links it when installed),
# Ctrl-D ends with status 0.
# Usage: cli_chat_tty.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
EDIT=0
ldd "$BIN" 2>/dev/null | grep -q libedit && EDIT=1
exec python3 - "$BIN" "$MODEL" "$EDIT" <<'PY'
import os, pty, select, sys, time
binary, model, edit = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "chat", "-m", model, "--device", "cpu", "-t", "1", "-n", "8", "--temp", "0"])
out = b""
def read_for(seconds):
    global out
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return
def prompts_reach(n, seconds=120):
    end = time.time() + seconds
    while time.time() < end and out.count(b"> ") < n:
        read_for(0.5)
    read_for(0.5)
    return out.count(b"> ") >= n
fails = []
def check(name, ok):
    if not ok:
        fails.append(name)
check("first prompt", prompts_reach(1))
os.write(fd, b"What is the capital of France?\r")
check("an answer and the next prompt", prompts_reach(2))
check("the answer names Paris", b"Paris" in out)
os.write(fd, b"\x03")  # Ctrl-C at the prompt
check("Ctrl-C at the prompt: a fresh prompt", prompts_reach(3, 10))
check("Ctrl-C at the prompt: still running", os.waitpid(pid, os.WNOHANG) == (0, 0))
if edit:
    mark = len(out)
    os.write(fd, b"\x1b[A")  # up arrow
    read_for(1.0)
    check("the up arrow recalls the last line", b"capital of France" in out[mark:])
    os.write(fd, b"\x15")  # Ctrl-U: clear the recalled line
    read_for(0.3)
os.write(fd, b"\x04")  # Ctrl-D
status = None
end = time.time() + 15
while time.time() < end:
    read_for(0.3)
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1
        break
check("Ctrl-D ends with status 0", status == 0)
if status is None:
    os.kill(pid, 9)
for f in fails:
    print("FAIL:", f, file=sys.stderr)
if fails:
    print(out.decode(errors="replace")[-1500:], file=sys.stderr)
print("cli_chat_tty: %d failed (line editing %s)" % (len(fails), "libedit" if edit else "none"))
sys.exit(1 if fails else 0)
PY
