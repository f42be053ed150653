// A broadcast server on the npm package `ws`: every message received is sent to every
// other open client, binary or text as it came. The peer of tools/bench/run.sh (W1, W4).
//   node ws-broadcast.mjs PORT [HOST [CERT KEY]]   (HOST defaults to 127.0.0.1; with a
//   PEM certificate and key it serves wss:// through node's https)
// No storage, no protocol, no per-client queue cap: the floor of a Node.js fan-out.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { WebSocketServer, WebSocket } from 'ws';

const port = Number(process.argv[2]);
const host = process.argv[3] || '127.0.0.1';
const [cert, key] = process.argv.slice(4, 6);
if (!Number.isInteger(port) || port <= 0 || port > 65535 || (cert && !key)) {
  console.error('usage: node ws-broadcast.mjs PORT [HOST [CERT KEY]]');
  process.exit(2);
}
const https = cert ? createServer({ cert: readFileSync(cert), key: readFileSync(key) }) : null;

// perMessageDeflate off: the other servers in the benchmark do not compress either.
// A subprotocol asked for by the client is accepted as it is.
const wss = new WebSocketServer({
  ...(https ? { server: https } : { host, port }),
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
const listening = () => console.log(`ws-broadcast: listening on ${host}:${port}${https ? ' (TLS)' : ''}`);
if (https) https.listen(port, host, listening);
else wss.on('listening', listening);
const fail = (e) => {
  console.error(`ws-broadcast: ${e.message}`);
  process.exit(1);
};
wss.on('error', fail);
if (https) https.on('error', fail);
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    for (const c of wss.clients) c.terminate();
    wss.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
