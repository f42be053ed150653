// Compiled (not run) by test/types.test.js: the declarations say what the code does.
import { GwClient, GroupLog, backoffDelay, isValidId, type ViewEntry } from 'gw-client';

const client = new GwClient({ url: 'ws://127.0.0.1:8443/ws', getToken: async () => 'token' });
client.addEventListener('view', (ev) => {
  const entries: ViewEntry[] = ev.detail.upserts;
  for (const e of entries) if (e.mid !== undefined) console.log(e.mid, e.from, e.text);
});
client.addEventListener('state', (ev) => console.log(ev.detail.state, ev.detail.attempt));
client.start();
client.join('lobby');
client.open('lobby');
const cid: string = client.send('lobby', 'hello');
client.retry(cid);
const unread: number = client.groupList()[0]?.unread ?? 0;
const log = new GroupLog();
const r: 'held' | 'duplicate' | 'ignored' = log.hold({ mid: 1, from: 'a', ts: 1, body: 'x' });
const d: number = backoffDelay(3) + log.advance() + unread;
if (isValidId('lobby')) console.log(r, d);
