// Compiled (not run) by test/types.test.js: the declarations say what the code does.
import { GwClient, GroupLog, backoffDelay, isValidId, type ViewEntry, type Receipts, type Presence, type GwRequestError, type Cursor, type MessageVersion, type StoredMessage, type StoreState, type Reacted, type Reaction, type ChangesDetail } from 'gw-client';

const client = new GwClient({ url: 'ws://127.0.0.1:8443/ws', getToken: async () => 'token' });
client.addEventListener('view', (ev) => {
  const entries: ViewEntry[] = ev.detail.upserts;
  for (const e of entries) if (e.mid !== undefined) console.log(e.mid, e.from, e.text);
});
client.addEventListener('state', (ev) => console.log(ev.detail.state, ev.detail.attempt));
client.addEventListener('state', (ev) => {
  // A certificate the client does not trust (node): reason 'tls', with the error's text.
  const why: string = ev.detail.reason === 'tls' ? `TLS: ${ev.detail.error ?? ''}` : ev.detail.reason;
  const last: string | undefined = client.error;
  console.log(why, last);
});
client.addEventListener('store', (ev) => {
  // The gateway cannot store now, or a send is late: the page can say so.
  const s: StoreState = ev.detail.state;
  console.log(s === 'ok' ? '' : s, client.storeState);
});
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

// What members see of each other: reads, receipts, presence, typing.
client.markRead('lobby', 3);
const read: number | null = client.groupList()[0]?.read ?? null;
client.receipts('lobby', 3).then((r: Receipts) => {
  const names: string[] = r.readers ?? [];
  console.log(r.delivered, r.read, r.of, names.join(', '));
}, (e: GwRequestError) => console.log(e.code));
client.watch('lobby', [1, 2, 3]);
client.addEventListener('receipts', (ev) => console.log(ev.detail.mid, ev.detail.read, client.receiptsOf('lobby', ev.detail.mid)?.of));
client.addEventListener('cursors', (ev) => {
  const c: Cursor[] = ev.detail.cursors;
  for (const x of c) console.log(x.uid, x.ack, x.read ?? 'never');
});
client.unwatch('lobby');
const p: Promise<Presence> = client.presence('lobby', { subscribe: true });
p.then((x) => x.members?.filter((m) => m.online).map((m) => m.uid + m.lastSeen));
client.addEventListener('presence', (ev) => console.log(ev.detail.online, ev.detail.of, client.presenceOf(ev.detail.gid)?.members?.length));
client.addEventListener('online', (ev) => ev.detail.changes.forEach((c) => console.log(c.uid, c.online, c.lastSeen)));
const sentTyping: boolean = client.typing('lobby');
client.addEventListener('typing', (ev) => {
  const who: string[] = ev.detail.uids;
  console.log(who, client.typingIn(ev.detail.gid), sentTyping, read);
});

// A message's later versions: edits and recalls.
client.edit('lobby', 3, 'fixed a typo').then((v: MessageVersion) => console.log(v.ver, v.ts, v.body ?? ''), (e: GwRequestError) => console.log(e.code));
const recall: Promise<MessageVersion> = client.recall('lobby', 4);
recall.then((v) => console.log(v.recalled, v.body === undefined));
client.addEventListener('edited', (ev) => console.log(ev.detail.gid, ev.detail.mid, ev.detail.ver, ev.detail.from, ev.detail.body));
client.addEventListener('recalled', (ev) => console.log(ev.detail.mid, ev.detail.recalled, client.versionOf(ev.detail.gid, ev.detail.mid)));
client.addEventListener('view', (ev) => {
  for (const e of ev.detail.upserts) console.log(e.recalled ? 'message deleted' : e.text, e.ver > 0 ? '(edited)' : '');
});
const later: StoredMessage = { mid: 1, from: 'a', ts: 1, ver: 2, recalled: true };
const updated: boolean = log.update(later);
const kept: string | Uint8Array | undefined = log.held.get(1)?.body;
console.log(updated, kept);

// Retention: the horizon of a group, and a view that reached it.
const firstMid: number = client.groupList()[0]?.firstMid ?? 1;
const meta = client.viewMeta('lobby');
const top: string = meta.olderGone ? 'Older messages are no longer kept' : meta.hasOlder ? 'Load older' : 'The start';
const dropped: number[] | null = log.horizon(firstMid);
const moved: boolean = dropped !== null && log.olderGone() && !log.olderExists();
console.log(top, meta.firstMid, moved, log.firstMid);

// Reactions and the change cursor.
const reacting: Promise<Reacted> = client.react('lobby', 3, '👍');
reacting.then((r) => console.log(r.count, r.cseq, r.duplicate), (e: GwRequestError) => console.log(e.code));
client.react('lobby', 3, '👍', false).catch(() => {});
client.addEventListener('reacted', (ev) => console.log(ev.detail.uid, ev.detail.key, ev.detail.on, ev.detail.count));
client.addEventListener('changes', (ev) => {
  const d: ChangesDetail = ev.detail;
  console.log(d.gid, d.after, d.upto, d.entries, d.applied, d.gone, client.changeCursor(d.gid));
});
const chips: Reaction[] = client.reactionsOf('lobby', 3);
client.addEventListener('view', (ev) => {
  for (const e of ev.detail.upserts) for (const r of e.reactions ?? []) console.log(r.key, r.count, r.mine, e.cseq ?? 0);
});
const withReactions: StoredMessage = { mid: 2, from: 'a', ts: 1, cseq: 7, reactions: { '👍': 2 }, mine: ['👍'] };
const droppedMids: number[] = log.dropBelow(2);
console.log(chips, withReactions, droppedMids, ev0());
function ev0(): boolean {
  return client.viewMeta('lobby').catchingUp;
}
