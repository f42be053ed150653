// A broadcast server on the npm package `ws`: every message received is sent to every
// other open client, binary or text as it came. The peer of tools/bench/run.sh (W1, W4).
//   node ws-broadcast.mjs PORT [HOST]      (HOST defaults to 127.0.0.1)
// No storage, no protocol, no per-client queue cap: the floor of a Node.js fan-out.
import { WebSocketServer, WebSocket } from 'ws';

const port = Number(process.argv[2]);
const host = process.argv[3] || '127.0.0.1';
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('usage: node ws-broadcast.mjs PORT [HOST]');
  process.exit(2);
}

// perMessageDeflate off: the other servers in the benchmark do not compress either.
// A subprotocol asked for by the client is accepted as it is.
const wss = new WebSocketServer({
  host,
  port,
  perMessageDeflate: false,
  maxPayload: 1 << 20,
  handleProtocols: (protocols) => (protocols.size ? protocols.values().next().value : false),
});

wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => {
    for (const c of wss.clients)
      if (c !== ws && c.readyState === WebSocket.OPEN) c.send(data, { binary: isBinary });
  });
  ws.on('error', () => {});
});
wss.on('listening', () => console.log(`ws-broadcast: listening on ${host}:${port}`));
wss.on('error', (e) => {
  console.error(`ws-broadcast: ${e.message}`);
  process.exit(1);
});
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    for (const c of wss.clients) c.terminate();
    wss.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
