#!/usr/bin/env python3
"""A webhook receiver for the tests (standard library only): it checks each POST's
signature the way docs/API.md tells receivers to, and writes one JSON line per request
to --log: what it answered, whether the signature held, the headers and the raw body.

  webhook_receiver.py --secret-file F --log L [--port N | --port-file P] [--fail N]
                      [--status S] [--hang N]

--port N listens on 127.0.0.1:N (default: a free port, written to --port-file).

--fail N answers the first N requests with --status (default 500); --hang N holds the
first N requests' answers for 3 seconds (longer than the tests' --webhook-timeout).
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import sys
import threading
import time


def verify(secret: bytes, header: str, body: bytes, tolerance: int = 300) -> bool:
    """docs/API.md's check: the MAC of "t." + body, and a t within tolerance seconds."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        t, sig = parts["t"], parts["v1"]
        mac = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(mac, sig) and abs(time.time() - int(t)) <= tolerance
    except (KeyError, ValueError):
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail", type=int, default=0)
    ap.add_argument("--status", type=int, default=500)
    ap.add_argument("--hang", type=int, default=0)
    a = ap.parse_args()
    with open(a.secret_file, "rb") as f:
        secret = f.read().rstrip(b"\r\n")
    log = open(a.log, "a", buffering=1)
    seen = [0]
    lock = threading.Lock()  # requests are served on threads: a held one blocks no other

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                seen[0] += 1
                n = seen[0]
            status = a.status if n <= a.fail else 200
            if n <= a.hang:
                time.sleep(3)
            sig = self.headers.get("X-GW-Signature", "")
            line = json.dumps({
                "n": n, "answered": status, "valid": verify(secret, sig, body),
                "signature": sig, "attempt": self.headers.get("X-GW-Attempt"),
                "delivery": self.headers.get("X-GW-Delivery"),
                "content_type": self.headers.get("Content-Type"),
                "body": body.decode("utf-8", "replace")})
            with lock:
                log.write(line + "\n")
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(srv.server_address[1]))
        os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
