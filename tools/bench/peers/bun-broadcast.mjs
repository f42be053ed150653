// A broadcast server on Bun's own WebSocket server (Bun.serve, uWebSockets inside) with
// its pub/sub: every client subscribes to one topic when it opens, and every message
// received is published to that topic, which sends it to every other subscriber (a
// ServerWebSocket's publish leaves out the sender, as ws-broadcast.mjs does). The peer of
// tools/bench/run.sh (W1, W3, W4, w1big).
//   bun bun-broadcast.mjs PORT [HOST [CERT KEY]]   (HOST defaults to 127.0.0.1; with a
//   PEM certificate and key it serves wss://)
// No storage, no protocol, no per-client cap beyond Bun's defaults: the floor of a
// uWebSockets fan-out driven from JavaScript.
const port = Number(process.argv[2]);
const host = process.argv[3] || '127.0.0.1';
const [cert, key] = process.argv.slice(4, 6);
if (!Number.isInteger(port) || port <= 0 || port > 65535 || (cert && !key)) {
  console.error('usage: bun bun-broadcast.mjs PORT [HOST [CERT KEY]]');
  process.exit(2);
}
const topic = 'all';

let server;
try {
  server = Bun.serve({
    hostname: host,
    port,
    ...(cert ? { tls: { cert: Bun.file(cert), key: Bun.file(key) } } : {}),
    fetch(req, srv) {
      // A subprotocol asked for is accepted as it is (the first one offered).
      const asked = req.headers.get('sec-websocket-protocol');
      const headers = asked ? { 'Sec-WebSocket-Protocol': asked.split(',')[0].trim() } : undefined;
      if (srv.upgrade(req, { headers })) return undefined;
      return new Response('WebSocket only\n', { status: 400 });
    },
    websocket: {
      // Compression off: the other servers in the benchmark do not compress either.
      perMessageDeflate: false,
      maxPayloadLength: 1 << 20,
      // No idle timeout and no pings: the other servers send none either (W4 holds idle
      // sessions, and pings would be work the others do not do).
      idleTimeout: 0,
      sendPings: false,
      // backpressureLimit stays Bun's default; a slow subscriber is not closed for it
      // (the others do not close one either: they queue).
      closeOnBackpressureLimit: false,
      open(ws) {
        ws.subscribe(topic);
      },
      // Text arrives as a string, binary as a Buffer; publishing either sends the same
      // kind of frame (Bun's third argument of publish is compression, not the type).
      message(ws, data) {
        ws.publish(topic, data);
      },
    },
  });
} catch (e) {
  console.error(`bun-broadcast: ${e.message}`);
  process.exit(1);
}
console.log(`bun-broadcast: listening on ${host}:${port}${cert ? ' (TLS)' : ''}`);
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    server.stop(true);
    process.exit(0);
  });
