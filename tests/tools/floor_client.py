"""A second, independent WebSocket client against gw_floor (tests/tools/test_floor.c):
Debian's python3-websockets, which knows nothing of the floor. What the C test's raw
client does not: a message in fragments arrives whole, text stays text, a ping is answered
by a pong with its payload, and a close by a close with the same status code.

  python3 floor_client.py PORT     prints "floor_client: ok" and exits 0, else fails
"""
import asyncio
import sys

import websockets


async def main(port):
    url = f"ws://127.0.0.1:{port}/"
    a = await websockets.connect(url, subprotocols=["chat", "superchat"], max_size=None)
    b = await websockets.connect(url, max_size=None)
    assert a.subprotocol == "chat", a.subprotocol  # the first one offered
    assert b.subprotocol is None, b.subprotocol

    await a.send(iter([b"frag", b"mented ", b"message"]))  # three frames, one message
    got = await asyncio.wait_for(b.recv(), 10)
    assert got == b"fragmented message", got

    await a.send("text stays text: \u00e9")
    got = await asyncio.wait_for(b.recv(), 10)
    assert got == "text stays text: \u00e9", got

    pong = await a.ping(b"are you there")
    await asyncio.wait_for(pong, 10)  # resolved only by a pong with this payload

    await b.close(code=4321, reason="bye")
    assert b.close_code == 4321, b.close_code  # the server's close echoed the code

    await a.send(b"after b left")  # a sender with nobody to send to is fine
    await a.close()
    print("floor_client: ok")


asyncio.run(main(int(sys.argv[1])))
