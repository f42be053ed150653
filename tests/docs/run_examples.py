#!/usr/bin/python3
"""Every printed example, run as printed: the fenced code blocks of README.md, docs/API.md,
docs/CLIENT.md, docs/DEPLOY.md, docs/PROTOCOL.md and clients/js/README.md (the JS
package's own, which ships in its tarball).

  /usr/bin/python3 tests/docs/run_examples.py [REPO] [DOC...]

DOC: paths under REPO (e.g. docs/API.md clients/js/README.md) to run only those docs, in
that order; all of the above when none are named.

For each doc, the runner makes a home of its own (GW_HOME: a temporary folder with the
repository's folders linked in and a fresh, empty data/), starts $GW_HOME/tools/run.sh
in it (port 8443, which must be free), and runs the doc's blocks in order from another
temporary folder (so that a path that only works from the repository shows), with
GW_HOME set, as a reader who has run `export GW_HOME=/path/to/gw` would. At the doc's end
everything its blocks started is stopped and its folders removed.

What each block is, from its language and the marker comment on the line before it
(`<!-- example: ... -->`):
- ```sh: run with bash (-e, -o pipefail), in the doc's one working folder; the variables a
  block sets are there for the next block. A block that starts a gateway in the
  background (`run.sh ... &`, `build/gw ... &`) replaces the runner's: the runner stops
  its own first, then waits until https://localhost:8443/healthz answers.
- A ```json or plain ``` block right after an sh block is that block's printed output:
  JSON is compared with the last JSON values the block printed (the same keys, and the
  same values but for times, tokens and ids made at run time); text lines must appear in
  the output, in order (a line ending in `...` only as far as that).
- `<!-- example: file NAME -->`: the block is written to NAME in the working folder, for
  the sh block after it (which decides whether it passed).
- `<!-- example: transcript -->`: a JSON-subprotocol session (`>` sent, `<` expected,
  compared as JSON is above); the token `eyJ...` is replaced by a real one for alice.
- ```python and ```js on their own: run as a script (they must run without error).
- A lone ```json block: must parse.
- `<!-- example: skip (why) -->`: not meant to run here (a config file, a production
  path, a command that changes the machine); counted and listed with its reason.
Any other block is an error: mark it.

Prints `ok`, `not ok` (with the block's output) or `skip` for each, and last
`doc-examples: N ran, N passed, N failed, N skipped`; exits 1 if any failed.
"""
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = sys.argv[2:] or ["README.md", "docs/API.md", "docs/CLIENT.md", "docs/DEPLOY.md",
                        "docs/PROTOCOL.md", "clients/js/README.md"]
PORT = 8443
BLOCK_TIMEOUT = 240  # s: an npm install or a C build fits
# Values made at run time: compared by type only.
VOLATILE = {"ts", "exp", "token", "sid", "last_seen", "retry_ms", "id", "delivery",
            "node", "at", "since", "read_at", "edited_at", "uptime_s"}
MARK = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
STARTS_GW = re.compile(r"(run\.sh|build/gw)\b[^\n]*&\s*$", re.M)

counts = {"ran": 0, "passed": 0, "failed": 0, "skipped": 0}


def say(status, where, detail=""):
    print(f"{status} - {where}{(' ' + detail) if detail else ''}", flush=True)


def parse_blocks(path):
    """The fenced blocks of a markdown file: line, lang, text, marker, and whether only
    blank lines separate it from the block before."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, last_end = [], 0, -10
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = MARK.match(lines[k]) if k >= 0 else None
        follows = all(not lines[x].strip() for x in range(last_end + 1, i)) and last_end >= 0
        out.append({"line": i + 1, "lang": m.group(1), "text": "\n".join(lines[i + 1:j]) + "\n",
                    "mark": mark.group(1) if mark else None, "follows": follows})
        last_end = j
        i = j + 1
    return out


def json_values(text):
    """Every JSON value in text, in order (lines that are not JSON are passed over)."""
    dec, vals, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                v, end = dec.raw_decode(text, i)
                vals.append(v)
                i = end
                continue
            except ValueError:
                pass
        i += 1
    return vals


def differs(want, got, key=None, path="$"):
    """Where got does not match the printed want (None when it does)."""
    if key in VOLATILE:
        return None if type(want) is type(got) else f"{path}: {got!r} is not like {want!r}"
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path}: {got!r} is not an object"
        if set(want) != set(got):
            return f"{path}: keys {sorted(got)}, printed {sorted(want)}"
        for k in want:
            d = differs(want[k], got[k], k, f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{path}: {got!r}, printed {want!r}"
        for n, (w, g) in enumerate(zip(want, got)):
            d = differs(w, g, key, f"{path}[{n}]")
            if d:
                return d
        return None
    return None if want == got else f"{path}: {got!r}, printed {want!r}"


def check_output(expect, out):
    """None if out shows the printed output block."""
    if expect["lang"] == "json":
        want = json_values(expect["text"])
        got = json_values(out)
        if len(got) < len(want):
            return f"printed {len(want)} JSON value(s), got {len(got)}"
        for w, g in zip(want, got[len(got) - len(want):]):
            d = differs(w, g)
            if d:
                return d
        return None
    pos = 0
    for line in expect["text"].splitlines():
        line = line.strip()
        if line.endswith("..."):  # the rest of the line is left out
            line = line[:-3].rstrip()
        if not line:
            continue
        at = out.find(line, pos)
        if at < 0:
            return f"no line {line!r} in the output (in order)"
        pos = at + len(line)
    return None


class Doc:
    """One doc's run: its home, working folder, shell state and the processes it started."""

    def __init__(self, name):
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="gw-doc-")
        self.home = os.path.join(self.tmp, "gw")
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(os.path.join(self.home, "data"))
        os.makedirs(self.work)
        for entry in os.listdir(REPO):
            if entry not in ("data", ".git"):
                os.symlink(os.path.join(REPO, entry), os.path.join(self.home, entry))
        # A user of its own: what an example installs in $HOME goes with the doc's folder.
        self.user = os.path.join(self.tmp, "user")
        os.makedirs(self.user)
        self.env = dict(os.environ, GW_HOME=self.home, HOME=self.user)
        for k in ("GW_PORT", "GW_DATA", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
            self.env.pop(k, None)
        self.state = os.path.join(self.tmp, "state.sh")
        self.cwd = os.path.join(self.tmp, "cwd")
        with open(self.cwd, "w") as f:
            f.write(self.work + "\n")
        self.groups = []  # process groups to stop at the end
        self.gw = None
        self.n = 0

    def start_gateway(self):
        log = open(os.path.join(self.tmp, "run.log"), "w")
        self.gw = subprocess.Popen([os.path.join(self.home, "tools", "run.sh")], env=self.env,
                                   cwd=self.work, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.groups.append(self.gw.pid)
        if not wait_healthy(PORT, 180, self.gw):
            raise RuntimeError("tools/run.sh did not serve /healthz on 8443 within 180 s:\n" +
                               tail(os.path.join(self.tmp, "run.log")))

    def stop_gateway(self):
        if self.gw:
            stop_group(self.gw.pid, self.gw)
            self.gw = None

    def sh(self, text):
        """Runs an sh block; returns (rc, output)."""
        self.n += 1
        script = os.path.join(self.tmp, f"block{self.n}.sh")
        out_path = os.path.join(self.tmp, f"block{self.n}.out")
        with open(script, "w") as f:
            f.write("set -a\n")
            f.write(f'[ -f "{self.state}" ] && source "{self.state}"\n')
            f.write(f'cd "$(cat "{self.cwd}")"\n')
            f.write(f"trap 'export -p | grep -vE \"^declare -x (PWD|OLDPWD|SHLVL|_)=\" "
                    f"> \"{self.state}\"; pwd > \"{self.cwd}\"' EXIT\n")
            f.write("set -eo pipefail\n")
            f.write(text)
        with open(out_path, "w") as out:
            p = subprocess.Popen(["bash", script], env=self.env, stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
            self.groups.append(p.pid)
            try:
                rc = p.wait(BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                stop_group(p.pid, p)
                rc = f"timeout after {BLOCK_TIMEOUT} s"
        time.sleep(0.2)  # what its background processes print at once
        return rc, open(out_path, errors="replace").read()

    def finish(self):
        for g in reversed(self.groups):
            stop_group(g)
        shutil.rmtree(self.tmp, ignore_errors=True)


def group_alive(pgid):
    """Whether a process of the group is still running (zombies, which a container's
    first process may never reap, do not count)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(pgid, proc=None):
    """SIGTERM to the group, then SIGKILL after 10 s; proc, its leader, is reaped."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        if proc:
            proc.poll()
        if not group_alive(pgid):
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc:
        proc.wait()


def wait_healthy(port, seconds, proc=None):
    """Whether the gateway on port answers /healthz 200 within seconds (and proc, the
    process that runs it, is still there)."""
    end = time.time() + seconds
    while time.time() < end and (proc is None or proc.poll() is None):
        r = subprocess.run(["curl", "-sk", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}",
                            f"https://localhost:{port}/healthz"], capture_output=True, text=True)
        if r.stdout == "200":
            return True
        time.sleep(0.3)
    return False


def port_free(port):
    r = subprocess.run(["curl", "-sk", "-m", "2", "-o", "/dev/null",
                        f"https://localhost:{port}/"], capture_output=True)
    return r.returncode == 7  # could not connect


def tail(path, n=40):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def indent(text, n=60):
    lines = text.rstrip("\n").split("\n")[-n:]
    return "\n".join("    " + line for line in lines)


async def transcript(doc, text):
    """A `>`/`<` JSON-subprotocol session against the doc's gateway."""
    import ssl

    import websockets
    tok = subprocess.run([os.path.join(REPO, "build", "tools", "gw_token"), "--user", "alice",
                          "--secret-file", os.path.join(doc.home, "data", "token-secret")],
                         capture_output=True, text=True, check=True).stdout.strip()
    ctx = ssl.create_default_context(cafile=os.path.join(doc.home, "data", "tls", "ca.pem"))
    got = []
    async with websockets.connect(f"wss://localhost:{PORT}/ws", subprotocols=["gw.v1.json"],
                                  ssl=ctx) as ws:
        for line in text.splitlines():
            if line.startswith("> "):
                await ws.send(line[2:].replace('"eyJ..."', json.dumps(tok)))
            elif line.startswith("< "):
                want = json.loads(line[2:])
                while not got:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    got.extend(frame if isinstance(frame, list) else [frame])
                d = differs(want, got.pop(0))
                if d:
                    return f"{line[:60]}...: {d}"
    return None


def run_doc(name):
    path = os.path.join(REPO, name)
    blocks = parse_blocks(path)
    doc = Doc(name)
    pending_files = []
    try:
        doc.start_gateway()
        i = 0
        while i < len(blocks):
            b = blocks[i]
            where = f"{name}:{b['line']}"
            mark = b["mark"] or ""
            i += 1
            if mark.startswith("skip"):
                counts["skipped"] += 1
                say("skip", where, mark[4:].strip(" :"))
                continue
            if mark.startswith("file "):
                fname = mark[5:].split()[0]
                with open(os.path.join(doc.work, fname), "w") as f:
                    f.write(b["text"])
                pending_files.append(where)
                continue
            counts["ran"] += 1
            failure, output = None, ""
            if mark.startswith("transcript"):
                try:
                    failure = asyncio.run(transcript(doc, b["text"]))
                except Exception as e:  # what the session did wrong, as a failure
                    failure = f"{type(e).__name__}: {e}"
            elif b["lang"] == "sh":
                starts_gw = STARTS_GW.search(b["text"].replace("\\\n", " "))
                if starts_gw:
                    doc.stop_gateway()
                rc, output = doc.sh(b["text"])
                if rc != 0:
                    failure = f"exit {rc}"
                elif starts_gw and not wait_healthy(PORT, 120):
                    failure = "the gateway it starts did not answer /healthz within 120 s"
                # Its printed output, if the next block is one.
                if i < len(blocks) and blocks[i]["follows"] and not blocks[i]["mark"] and \
                        blocks[i]["lang"] in ("json", "", "text"):
                    if not failure:
                        failure = check_output(blocks[i], output)
                    i += 1
            elif b["lang"] in ("python", "js"):
                ext = ".py" if b["lang"] == "python" else (
                    ".cjs" if "require(" in b["text"] else ".mjs")
                script = os.path.join(doc.tmp, f"snippet{b['line']}{ext}")
                with open(script, "w") as f:
                    f.write(b["text"])
                r = subprocess.run(["python3" if ext == ".py" else "node", script],
                                   cwd=doc.work, env=doc.env, capture_output=True, text=True,
                                   timeout=60)
                output = r.stdout + r.stderr
                failure = f"exit {r.returncode}" if r.returncode else None
            elif b["lang"] == "json":
                try:
                    json.loads(b["text"])
                except ValueError as e:
                    failure = f"not JSON: {e}"
            else:
                failure = (f"a ```{b['lang']} block the runner cannot run: mark it "
                           "(<!-- example: skip (why) -->, file NAME, transcript)")
            for fw in pending_files:
                say("not ok" if failure else "ok", fw, f"(a file for {where})")
                counts["ran"] += 1
                counts["failed" if failure else "passed"] += 1
            pending_files = []
            if failure:
                counts["failed"] += 1
                say("not ok", where, failure)
                if output:
                    print(indent(output), flush=True)
            else:
                counts["passed"] += 1
                say("ok", where, b["lang"] or "text")
                if os.environ.get("DOC_EXAMPLES_VERBOSE") and output:
                    print(indent(output), flush=True)
        for fw in pending_files:
            counts["ran"] += 1
            counts["failed"] += 1
            say("not ok", fw, "a file no sh block after it uses")
    except Exception as e:  # the doc's gateway did not start: its blocks did not run
        counts["failed"] += 1
        say("not ok", name, f"{type(e).__name__}: {e}")
    finally:
        doc.finish()


def main():
    if not port_free(PORT):
        print(f"doc-examples: port {PORT} is in use; the docs' examples use it: stop what "
              "listens there")
        print("doc-examples: 0 ran, 0 passed, 1 failed, 0 skipped")
        return 1
    t0 = time.time()
    for name in DOCS:
        print(f"# {name}", flush=True)
        run_doc(name)
    print(f"doc-examples: took {time.time() - t0:.0f} s")
    print("doc-examples: {ran} ran, {passed} passed, {failed} failed, {skipped} skipped"
          .format(**counts))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
