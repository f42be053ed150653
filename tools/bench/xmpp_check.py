#!/usr/bin/python3
"""A working check of an XMPP server set up by tools/bench/xmpp.sh, independent of gw_load.

  xmpp_check.py URL DOMAIN MUC USER1 USER2 ROOM [COUNT]

Over XMPP-over-WebSocket (RFC 7395, subprotocol "xmpp"), USER1 and USER2 (password
"bench") log in with SASL PLAIN and bind, join ROOM@MUC (USER1 first: it creates the room),
USER1 sends COUNT (default 5) groupchat messages; each must come back to USER1 (the room's
reflection, same id) and reach USER2. Then USER2 queries the room's archive (MAM,
urn:xmpp:mam:2, pages of 2 to page through RSM) and must find every message sent. Prints
one line of counts; exits 0 when all of it holds, 1 otherwise. Every wait is bounded (10 s).
Uses Debian's python3-websockets and the standard library's XML parser only.
"""
import asyncio
import base64
import sys
import uuid
import xml.etree.ElementTree as ET

import websockets

FRAMING = "urn:ietf:params:xml:ns:xmpp-framing"
SASL = "urn:ietf:params:xml:ns:xmpp-sasl"
BIND = "urn:ietf:params:xml:ns:xmpp-bind"
MUC = "http://jabber.org/protocol/muc"
MUC_USER = MUC + "#user"
MAM = "urn:xmpp:mam:2"
RSM = "http://jabber.org/protocol/rsm"
FWD = "urn:xmpp:forward:0"
TIMEOUT = 10


class Client:
    def __init__(self, url, domain, user):
        self.url, self.domain, self.user = url, domain, user
        self.ws = None

    async def recv(self):
        """The next stanza (an Element), within TIMEOUT seconds."""
        data = await asyncio.wait_for(self.ws.recv(), TIMEOUT)
        return ET.fromstring(data)

    async def until(self, pred):
        """Stanzas until one matches pred (returned); the others are kept in self.seen."""
        while True:
            el = await self.recv()
            if pred(el):
                return el
            self.seen.append(el)

    async def open_stream(self):
        await self.ws.send(f'<open xmlns="{FRAMING}" to="{self.domain}" version="1.0"/>')
        await self.until(lambda e: e.tag == f"{{{FRAMING}}}open")
        return await self.until(lambda e: e.tag == "{http://etherx.jabber.org/streams}features")

    async def login(self):
        self.seen = []
        self.ws = await websockets.connect(self.url, subprotocols=["xmpp"], open_timeout=TIMEOUT)
        if self.ws.subprotocol != "xmpp":
            raise RuntimeError(f"subprotocol {self.ws.subprotocol!r}, not xmpp")
        feats = await self.open_stream()
        mechs = [m.text for m in feats.iter(f"{{{SASL}}}mechanism")]
        if "PLAIN" not in mechs:
            raise RuntimeError(f"no SASL PLAIN offered: {mechs}")
        cred = base64.b64encode(f"\0{self.user}\0bench".encode()).decode()
        await self.ws.send(f'<auth xmlns="{SASL}" mechanism="PLAIN">{cred}</auth>')
        r = await self.recv()
        if r.tag != f"{{{SASL}}}success":
            raise RuntimeError(f"{self.user}: login refused: {ET.tostring(r)[:200]}")
        feats = await self.open_stream()
        await self.ws.send(f'<iq xmlns="jabber:client" type="set" id="b"><bind xmlns="{BIND}"><resource>r</resource></bind></iq>')
        r = await self.until(lambda e: e.tag.endswith("iq") and e.get("id") == "b")
        if r.get("type") != "result":
            raise RuntimeError(f"bind failed: {ET.tostring(r)[:200]}")
        sess = feats.find("{urn:ietf:params:xml:ns:xmpp-session}session")
        if sess is not None and sess.find("{urn:ietf:params:xml:ns:xmpp-session}optional") is None:
            await self.ws.send('<iq xmlns="jabber:client" type="set" id="s"><session xmlns="urn:ietf:params:xml:ns:xmpp-session"/></iq>')
            await self.until(lambda e: e.tag.endswith("iq") and e.get("id") == "s")
        await self.ws.send("<presence xmlns=\"jabber:client\"/>")

    async def join(self, room):
        await self.ws.send(f'<presence xmlns="jabber:client" to="{room}/{self.user}"><x xmlns="{MUC}">'
                           '<history maxstanzas="0"/></x></presence>')

        def own(e):
            if not e.tag.endswith("presence"):
                return False
            if e.get("type") == "error":
                raise RuntimeError(f"join refused: {ET.tostring(e)[:300]}")
            return any(s.get("code") == "110" for s in e.iter(f"{{{MUC_USER}}}status"))
        await self.until(own)

    async def close(self):
        try:
            await self.ws.send(f'<close xmlns="{FRAMING}"/>')
            await self.ws.close()
        except Exception:
            pass


def body_of(e):
    b = e.find("{jabber:client}body")
    return b.text if b is not None else None


async def main(url, domain, muc, u1, u2, room, count):
    room = f"{room}@{muc}"
    a, b = Client(url, domain, u1), Client(url, domain, u2)
    await a.login()
    await a.join(room)
    await b.login()
    await b.join(room)
    sent, reflected, delivered = [], 0, 0
    for i in range(count):
        mid = uuid.uuid4().hex
        body = f"check {i} {mid}"
        await a.ws.send(f'<message xmlns="jabber:client" to="{room}" type="groupchat" id="{mid}"><body>{body}</body></message>')
        sent.append(body)

        def same(e, mid=mid):
            if e.tag.endswith("message") and e.get("type") == "error":
                raise RuntimeError(f"send refused: {ET.tostring(e)[:300]}")
            return e.tag.endswith("message") and e.get("id") == mid
        await a.until(same)
        reflected += 1
        await b.until(lambda e, body=body: e.tag.endswith("message") and body_of(e) == body)
        delivered += 1
    # The archive, page by page (RSM max 2), from the start.
    archived, pages, last = [], 0, None
    while pages < 100:
        qid = f"q{pages}"
        after = f"<after>{last}</after>" if last else ""
        await b.ws.send(f'<iq xmlns="jabber:client" type="set" to="{room}" id="{qid}"><query xmlns="{MAM}" queryid="{qid}">'
                        f'<set xmlns="{RSM}"><max>2</max>{after}</set></query></iq>')
        while True:
            e = await b.recv()
            if e.tag.endswith("message"):
                r = e.find(f"{{{MAM}}}result")
                if r is not None and r.get("queryid") == qid:
                    m = r.find(f"{{{FWD}}}forwarded/{{jabber:client}}message")
                    if m is not None and body_of(m) is not None:
                        archived.append(body_of(m))
            elif e.tag.endswith("iq") and e.get("id") == qid:
                if e.get("type") != "result":
                    raise RuntimeError(f"MAM query refused: {ET.tostring(e)[:300]}")
                fin = e.find(f"{{{MAM}}}fin")
                break
        pages += 1
        lastel = fin.find(f"{{{RSM}}}set/{{{RSM}}}last")
        if fin.get("complete") == "true" or lastel is None:
            break
        last = lastel.text
    await a.close()
    await b.close()
    missing = [s for s in sent if s not in archived]
    print(f"xmpp_check: {url}: sent {len(sent)}, reflected {reflected}, delivered {delivered}, "
          f"archived {len(archived)} in {pages} MAM pages, missing from the archive {len(missing)}")
    return 0 if not missing and reflected == delivered == len(sent) else 1


if __name__ == "__main__":
    if len(sys.argv) not in (7, 8):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    n = int(sys.argv[7]) if len(sys.argv) == 8 else 5
    try:
        sys.exit(asyncio.run(main(*sys.argv[1:7], n)))
    except (Exception, asyncio.TimeoutError) as e:
        print(f"xmpp_check: {sys.argv[1]}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
