// An application of the package, run by revoke.test.js as a child process: signs in with
// one token (GW_APP_URL, GW_APP_TOKEN), gives no other (the same again), and stops the
// client once it is stopped; the process must then exit by itself. Loaded by the test
// runner too (everything under test/ is): without GW_APP_URL it does nothing.
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';

const url = process.env.GW_APP_URL;
if (url) {
  const token = process.env.GW_APP_TOKEN;
  const client = new GwClient({ url, getToken: async () => token, WebSocketImpl: WebSocket });
  client.addEventListener('state', (ev) => {
    console.log(`${ev.detail.state} ${ev.detail.reason}`);
    if (ev.detail.state === 'stopped') client.stop();
  });
  client.start();
}
