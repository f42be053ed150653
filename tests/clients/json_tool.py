#!/usr/bin/python3
"""The JSON subprotocol (gw.v1.json) from a WebSocket library that knows nothing of the
gateway: Debian's python3-websockets, as a developer would use it from a shell.

  /usr/bin/python3 tests/clients/json_tool.py BUILD_DIR

Starts BUILD_DIR/gw (--insecure, a free port, a temporary data folder), mints tokens with
BUILD_DIR/tools/gw_token, and checks: hello, join, send and the push to a second
session, a binary body as {"base64": ...}, a pull, and an error. Prints
"json-tool: N passed, M failed" last; exits 1 if anything failed.
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

import websockets

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {name}")
    else:
        failed += 1
        print(f"FAIL: {name} {detail}")


async def recv(ws):
    """The next message; a batch (an array) is handed out one message at a time."""
    while not recv.pending.get(ws):
        frame = await asyncio.wait_for(ws.recv(), 5)
        assert isinstance(frame, str), "a JSON session gets text frames"
        m = json.loads(frame)
        recv.pending[ws] = m if isinstance(m, list) else [m]
    return recv.pending[ws].pop(0)


recv.pending = {}


async def session(url, token):
    ws = await websockets.connect(url, subprotocols=["gw.v1.json"])
    await ws.send(json.dumps({"t": "hello", "rid": 1, "token": token}))
    w = await recv(ws)
    return ws, w


async def main(url, tok):
    alice, w = await session(url, tok("alice"))
    check("hello gets welcome", w.get("t") == "welcome" and w.get("uid") == "alice", w)
    check("the subprotocol is gw.v1.json", alice.subprotocol == "gw.v1.json")
    bob, _ = await session(url, tok("bob"))
    for ws in (alice, bob):
        await ws.send(json.dumps({"t": "join", "rid": 2, "gid": "tools"}))
        j = await recv(ws)
    check("join gets joined", j.get("t") == "joined" and j.get("gid") == "tools", j)
    await alice.send(json.dumps({"t": "send", "rid": 3, "gid": "tools", "cid": "w1",
                                 "body": "hi from python"}))
    s = await recv(alice)
    check("send gets sent with a mid", s.get("t") == "sent" and s.get("mid") == 1, s)
    m = await recv(bob)
    check("the other session gets the msg", m.get("t") == "msg" and
          m.get("body") == "hi from python" and m.get("from") == "alice", m)
    await alice.send(json.dumps({"t": "send", "rid": 4, "gid": "tools", "cid": "w2",
                                 "body": {"base64": "3q2+7w=="}}))
    await recv(alice)
    m = await recv(bob)
    check("a binary body comes as base64", m.get("body") == {"base64": "3q2+7w=="}, m)
    await bob.send(json.dumps({"t": "pull", "rid": 5, "gid": "tools", "after": 0}))
    p = await recv(bob)
    check("pull gets a page of both", p.get("t") == "page" and
          [x["mid"] for x in p.get("msgs", [])] == [1, 2], p)
    await bob.send(json.dumps({"t": "send", "rid": 6, "gid": "elsewhere", "cid": "w3",
                               "body": "x"}))
    e = await recv(bob)
    check("an error names its code", e.get("t") == "err" and e.get("code") == "not_member"
          and e.get("rid") == 6, e)
    await alice.close()
    await bob.close()


def run():
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        gw = subprocess.Popen([os.path.join(build, "gw"), "--insecure", "--listen", "127.0.0.1",
                               "--port", "0", "--port-file", port_file, "--data",
                               os.path.join(tmp, "data")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.exists(port_file) and open(port_file).read().strip():
                    break
                time.sleep(0.05)
            port = open(port_file).read().strip()
            secret = os.path.join(tmp, "data", "token-secret")

            def tok(uid):
                return subprocess.check_output(
                    [os.path.join(build, "tools", "gw_token"), "--user", uid,
                     "--secret-file", secret], text=True).strip()

            asyncio.run(asyncio.wait_for(main(f"ws://127.0.0.1:{port}/ws", tok), 30))
        except Exception as e:  # a failure to connect or a timeout counts as one
            check("the session ran to its end", False, repr(e))
        finally:
            gw.terminate()
            gw.wait(10)
    print(f"json-tool: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())
