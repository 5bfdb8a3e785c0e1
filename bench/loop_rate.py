#!/usr/bin/env python3
"""loop_rate.py — how often a small model's answer falls into a loop, with and without a
repetition penalty (issue 26 item 6: the default against loops is set by this measurement).

Runs `longctx run --chat` on 50 varied prompts (questions, instructions, writing tasks, a few
with a --system message) for each setting, greedy unless --temp is given, -n 60 tokens, and
counts per setting:
  loops     answers in which one word 4-gram occurs 3 or more times (a repeated sentence or
            phrase: "I'm a pirate, I'm a pirate, ...")
  distinct4 mean share of distinct word 4-grams in an answer (1 = no phrase repeated)
  correct   of the 12 factual prompts, answers containing the expected word (a penalty that
            pushes the model off the right word shows here)
Writes a Markdown table (and every answer) to --out.

Usage: python3 bench/loop_rate.py [--bin build/longctx] [--model M] [--penalties 1,1.1,1.2] [--scope all]
                                  [--temp 0] [-n 60] [--out bench/results/loop-rate-....md]
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (system or None, prompt, expected word or None)
PROMPTS = [
    (None, "What is the capital of France?", "paris"),
    (None, "What is the capital of Japan?", "tokyo"),
    (None, "How many legs does a spider have?", "eight|8"),
    (None, "What planet is known as the Red Planet?", "mars"),
    (None, "Who wrote Romeo and Juliet?", "shakespeare"),
    (None, "What is the boiling point of water in Celsius?", "100"),
    (None, "What is the largest ocean on Earth?", "pacific"),
    (None, "What gas do plants absorb from the air?", "carbon dioxide|co2"),
    (None, "What is 12 times 12?", "144"),
    (None, "Which language is spoken in Brazil?", "portuguese"),
    (None, "What is the chemical symbol for gold?", "au"),
    (None, "How many days are in a week?", "seven|7"),
    (None, "Explain what a black hole is.", None),
    (None, "Why is the sky blue?", None),
    (None, "Give me three tips for sleeping better.", None),
    (None, "Write a short poem about the sea.", None),
    (None, "Tell me a joke about computers.", None),
    (None, "What is machine learning?", None),
    (None, "How do I boil an egg?", None),
    (None, "Describe a cat to someone who has never seen one.", None),
    (None, "What are the benefits of exercise?", None),
    (None, "Summarise the story of Cinderella in two sentences.", None),
    (None, "Write a haiku about autumn.", None),
    (None, "What is the difference between weather and climate?", None),
    (None, "How does a bicycle work?", None),
    (None, "List five fruits.", None),
    (None, "What should I pack for a weekend camping trip?", None),
    (None, "Write a friendly email inviting a colleague to lunch.", None),
    (None, "What is photosynthesis?", None),
    (None, "Translate 'good morning' into Spanish.", None),
    (None, "How can I learn to play the guitar?", None),
    (None, "What is the meaning of the word 'ephemeral'?", None),
    (None, "Write the opening line of a mystery novel.", None),
    (None, "Why do leaves change colour in autumn?", None),
    (None, "What is a prime number?", None),
    (None, "Give me a recipe for pancakes.", None),
    (None, "How do airplanes stay in the air?", None),
    (None, "What is the water cycle?", None),
    (None, "Describe your ideal holiday.", None),
    (None, "What are some good habits for studying?", None),
    ("You are a pirate.", "What is the capital of France?", "paris"),
    ("You are a pirate.", "Tell me about your ship.", None),
    ("You are a helpful assistant who answers briefly.", "What is gravity?", None),
    ("You are a poet.", "Describe the moon.", None),
    ("You are a chef.", "What should I cook tonight?", None),
    ("You are a teacher for young children.", "What is a volcano?", None),
    ("Answer in one sentence.", "Why do we have seasons?", None),
    ("You are a travel guide.", "What should I see in Rome?", None),
    ("You are a grumpy old man.", "What do you think of smartphones?", None),
    ("You are a sports commentator.", "Describe a football match.", None),
]
assert len(PROMPTS) == 50

# answers copied from a short document (-f): a penalty over the prompt's tokens pushes the
# model off the very words it must copy. (document, question, expected word)
DOCS = [
    ("The secret password is BLUE-42. Alice owns a red bicycle. Bob lives in Lisbon.",
     "What is the secret password?", "blue-42|blue 42"),
    ("The secret password is BLUE-42. Alice owns a red bicycle. Bob lives in Lisbon.",
     "Where does Bob live?", "lisbon"),
    ("Meeting notes: the budget review moved to Thursday at 3 pm in room 214.",
     "Which room is the budget review in?", "214"),
    ("The recipe needs 200 grams of flour, two eggs and a pinch of salt.",
     "How many grams of flour does the recipe need?", "200"),
    ("Our office cat is called Marmalade and she sleeps on the printer.",
     "What is the office cat called?", "marmalade"),
    ("The train to Zurich leaves from platform 7 at 9:15.",
     "Which platform does the train to Zurich leave from?", "7|seven"),
    ("Dr. Okafor discovered the comet in 1998 from an observatory in Chile.",
     "Who discovered the comet?", "okafor"),
    ("The invoice number is INV-5531 and it is due on March 3.",
     "What is the invoice number?", "inv-5531|5531"),
    ("The castle was built in 1342 by a duke named Albrecht.",
     "Who built the castle?", "albrecht"),
    ("Project Falcon is led by Maria Chen and ships in October.",
     "Who leads Project Falcon?", "maria chen|chen"),
]


def words(text):
    return re.findall(r"[a-z0-9']+", text.lower())


def loop_stats(text):
    w = words(text)
    grams = [tuple(w[i:i + 4]) for i in range(len(w) - 3)]
    if not grams:
        return False, 1.0
    counts = {}
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    return max(counts.values()) >= 3, len(counts) / len(grams)


def run(a, system, prompt, penalty, doc=None):
    cmd = [a.bin, "run", "-m", a.model, "--chat", "-p", prompt, "-n", str(a.n), "--temp",
           str(a.temp), "--repeat-penalty", str(penalty), "--device", "cpu", "-t", str(a.threads)]
    if a.scope:
        cmd += ["--repeat-scope", a.scope]
    if system:
        cmd += ["--system", system]
    if doc:
        path = os.path.join(a.tmp, "doc.txt")
        with open(path, "w") as f:
            f.write(doc + "\n")
        cmd += ["-f", path]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "longctx"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--penalties", default="1,1.1,1.2")
    ap.add_argument("--temp", default="0")
    ap.add_argument("-n", type=int, default=60)
    ap.add_argument("-t", "--threads", type=int, default=1,
                    help="CPU threads a run (1: steady on a shared machine)")
    ap.add_argument("--scope", choices=["generated", "all"],
                    help="--repeat-scope (default: the binary's default)")
    ap.add_argument("--out")
    a = ap.parse_args()
    import tempfile
    a.tmp = tempfile.mkdtemp()
    pens = [float(x) for x in a.penalties.split(",")]
    rows, answers = [], []
    t0 = time.time()
    for p in pens:
        n_loop, d4, correct, n_fact = 0, 0.0, 0, 0
        for i, (system, prompt, want) in enumerate(PROMPTS):
            out = run(a, system, prompt, p)
            loop, d = loop_stats(out)
            n_loop += loop
            d4 += d
            ok = None
            if want:
                n_fact += 1
                ok = any(re.search(r"\b%s\b" % x, out.lower()) for x in want.split("|"))
                correct += ok
            answers.append((p, i, loop, ok, out))
            print("rp %.2f  %2d  %s%s  %s" % (p, i, "LOOP " if loop else "     ",
                                             "" if ok is None else ("ok " if ok else "NO "),
                                             out.replace("\n", " ")[:100]), file=sys.stderr)
        copied = 0
        for i, (doc, q, want) in enumerate(DOCS):
            out = run(a, None, q, p, doc)
            ok = any(re.search(r"\b%s\b" % re.escape(x).replace("\\ ", " "), out.lower())
                     for x in want.split("|"))
            copied += ok
            answers.append((p, "doc%d" % i, False, ok, out))
            print("rp %.2f doc%d %s %s" % (p, i, "ok " if ok else "NO ", out.replace("\n", " ")[:100]),
                  file=sys.stderr)
        rows.append((p, n_loop, d4 / len(PROMPTS), correct, n_fact, copied))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = ["# Loop rate: %s, `run --chat -n %d --temp %s%s`, 50 prompts" % (
                 os.path.basename(a.model), a.n, a.temp,
                 " --repeat-scope " + a.scope if a.scope else ""),
             "",
             "%s, commit %s, CPU, %.0f s. A loop: one word 4-gram 3 or more times in the answer; "
             "distinct-4: mean share of distinct word 4-grams; correct: factual answers "
             "containing the expected word; copied: answers about a one-line document (-f) that contain "
             "the word to copy from it. Written by bench/loop_rate.py." % (
                 datetime.date.today().isoformat(), commit, time.time() - t0),
             "",
             "| --repeat-penalty | loops (of 50) | distinct-4 | correct (of %d) | copied (of %d) |" % (
                 rows[0][4], len(DOCS)),
             "|---|---|---|---|---|"]
    for p, nl, d4, c, nf, cp in rows:
        lines.append("| %g | %d (%.0f%%) | %.3f | %d | %d |" % (p, nl, 100.0 * nl / 50, d4, c, cp))
    lines += ["", "## Answers", ""]
    for p, i, loop, ok, out in answers:
        lines.append("- rp %g, %s%s%s: %s" % (p, i, " LOOP" if loop else "",
                                               "" if ok is None else (" ok" if ok else " WRONG"),
                                               out.replace("\n", " ").replace("|", "\\|")))
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[:6 + len(rows)]))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
