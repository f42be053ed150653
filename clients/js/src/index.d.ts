// Types of gw-client, the gateway's protocol v1 client (docs/PROTOCOL.md).

/** The subprotocol the client asks for: "gw.v1" (MessagePack frames). */
export declare const SUBPROTOCOL: 'gw.v1';

/** Delay in ms before reconnect attempt `attempt` (0 = first): 500 ms doubling to 15 s,
 * half of each step fixed and half random. */
export declare function backoffDelay(attempt: number, random?: () => number): number;
/** A client message id (random, unique per user across tabs and reloads). */
export declare function makeCid(): string;
/** True for an id the protocol allows: 1-64 characters of [A-Za-z0-9_.:-]. */
export declare function isValidId(s: unknown): s is string;
/** A body as text: a string as it is, bytes decoded as UTF-8 when they are. */
export declare function bodyText(body: string | Uint8Array | unknown): { text: string; binary: boolean };

/** A stored message as the gateway sends it (a `msg`, or an entry of a `page`), at the
 * highest version the client has seen of it. */
export interface StoredMessage {
  mid: number;
  from: string;
  /** When it was sent (a later version keeps it). */
  ts: number;
  /** The type the sender used: text, or bytes. Absent for a recalled message. */
  body?: string | Uint8Array;
  /** Its version: 0 (or absent) as sent, 1, 2, ... after each edit or its recall. */
  ver?: number;
  /** Recalled by its sender (or erased with its sender): a tombstone, with no body and
   * no reactions. */
  recalled?: boolean;
  /** The cseq of its latest change (edit, recall, erasure, reaction): the state held is
   * complete up to it. Absent (0) when never changed. */
  cseq?: number;
  /** Its reactions: key -> count (keys with a count only). */
  reactions?: Record<string, number>;
  /** The keys of them the reader set. */
  mine?: string[];
  /** Held from a page read before changes already applied, or with a push applied over
   * a hole: complete once a `changes` entry (pulled already) replaces it. */
  partial?: boolean;
}

/** One reaction key of a message, as a view shows it. */
export interface Reaction {
  key: string;
  count: number;
  /** The user set it. */
  mine: boolean;
}

/** A reaction set or cleared: what react() resolves with, and the 'reacted' event. */
export interface Reacted {
  gid: string;
  mid: number;
  /** Who set or cleared it. */
  uid: string;
  key: string;
  on: boolean;
  /** The key's count on the message now. */
  count: number;
  /** The change's cseq (with duplicate, the message's current cseq). */
  cseq: number;
  /** Nothing changed (the key was already set, or not set): not pushed to anyone. */
  duplicate: boolean;
}

/** A `changes` reply applied to what a group's view holds. */
export interface ChangesDetail {
  gid: string;
  /** The cursor it asked after. */
  after: number;
  /** The cursor now (complete up to it). */
  upto: number;
  /** Messages in it (each the latest state of one mid changed after `after`). */
  entries: number;
  /** Of them, held messages it replaced. */
  applied: number;
  /** The change log no longer reached `after` (changes_gone_before): the window held is
   * being paged again. */
  gone: boolean;
}

/** A later version of a message: an edit (its new body), or its recall (no body). What
 * edit() and recall() resolve with, and the detail of the 'edited' and 'recalled'
 * events. */
export interface MessageVersion {
  gid: string;
  mid: number;
  /** 1, 2, ...: the version this is (0 is the message as sent). */
  ver: number;
  /** When this version was made (ms since the epoch). */
  ts: number;
  /** The message's sender (only the sender edits or recalls). */
  from: string;
  recalled: boolean;
  /** The new body (an edit); absent for a recall. */
  body?: string | Uint8Array;
  /** The change's cseq (a gateway with change cursors). */
  cseq?: number;
}

/** What a group's view shows: stored messages by mid, then the user's pending ones. */
export interface ViewEntry {
  key: string;
  sort: number;
  /** Absent for a message not stored yet. */
  mid?: number;
  cid?: string;
  from: string;
  ts?: number;
  text: string;
  binary: boolean;
  own: boolean;
  /** 'stored', or for the user's own sends 'pending' (waiting for `sent`) or 'failed'. */
  state: 'stored' | 'pending' | 'failed';
  code?: string | null;
  /** The version shown: 0 as sent, more once edited (or recalled). */
  ver: number;
  /** Recalled by its sender (or erased): text is '' (show that it was deleted). */
  recalled: boolean;
  /** The cseq of the state shown (0: never changed; absent for the user's messages on
   * their way). */
  cseq?: number;
  /** Its reactions by key ([] for none, and for a recalled message). */
  reactions?: Reaction[];
}

export interface GroupSummary {
  gid: string;
  lastMid: number;
  /** The group's horizon (retention): messages with a lower mid were deleted and are
   * never pulled again; 1 while none were (or from a gateway before retention). Mids
   * stay dense from firstMid to lastMid. */
  firstMid: number;
  /** Messages after the user's read cursor once the user sent one (here, in another tab,
   * or from another device: the gateway's welcome tells), else after its ack. Never
   * counts messages below firstMid. */
  unread: number;
  /** The read cursor (what the person has seen), null while the user never sent one. */
  read: number | null;
  open: boolean;
}

/** A message's receipts: members that hold it, members that have seen it (one that
 * never sent a read counts by its ack), of how many (the sender included), and in a
 * group of at most 100 members (the gateway's --receipt-list-max) who has seen it. */
export interface Receipts {
  gid: string;
  mid: number;
  delivered: number;
  read: number;
  of: number;
  readers?: string[];
}

/** Where a member of a watched small group moved: its ack, and its read when it ever
 * sent one. */
export interface Cursor {
  uid: string;
  ack: number;
  read?: number;
}

export interface PresenceMember {
  uid: string;
  online: boolean;
  /** Ms since the epoch the member was last online (now while it is; 0: never). */
  lastSeen: number;
}

/** Who of a group's members is online; each member listed in a group of at most 100
 * members (the gateway's --presence-list-max). */
export interface Presence {
  gid: string;
  online: number;
  of: number;
  members?: PresenceMember[];
}

/** How a receipts(), presence(), edit() or recall() promise fails: the gateway's error
 * code (not_member, unauthorized, conflict, ...), 'offline' (it could not be sent; for
 * edit and recall: signed out) or 'disconnected' (the connection was lost before the
 * reply; edit and recall are sent again after the reconnect instead). */
export interface GwRequestError extends Error {
  code: string;
}

export interface ViewMeta {
  /** Older messages can be loaded (loadOlder). */
  hasOlder: boolean;
  /** The view shows the group from its horizon (firstMid > 1) and there is nothing
   * older to load because the group's retention deleted it: show "older messages are
   * no longer kept" rather than "the start of the group". False while hasOlder, while
   * older messages load, and when the view reaches mid 1. */
  olderGone: boolean;
  loadingOlder: boolean;
  /** The view's first page, newer messages, or the changes to the messages it holds
   * (`changes` after its cursor: on open, after a reconnect, on a hole or `changed`, or
   * its window paged again) are on their way: it is current once this is false. */
  catchingUp: boolean;
  firstUnread: number | null;
  lastMid: number;
  /** The group's horizon: messages below it were deleted (1: none were). */
  firstMid: number;
  w?: number | null;
}

export type ConnectionState = 'connecting' | 'online' | 'offline' | 'stopped';

/** What the user's messages on their way say of the gateway's store, while online:
 * 'unavailable' while one is sent again after the gateway refused it with `unavailable`
 * (it cannot store now: a database down or failing over, a full disk), 'slow' while one
 * has had no answer for 3 s on a connection that is up (the store is slow or stuck, or
 * the path to the gateway is: the protocol does not tell which), else 'ok' (also
 * whenever not online). */
export type StoreState = 'ok' | 'unavailable' | 'slow';

export interface StateDetail {
  state: ConnectionState;
  /** Why, in words: '' (connecting, online), 'connection lost', 'gateway restarting',
   * 'gateway waiting for its database' (4013), 'closed (CODE: REASON)', 'connect timeout', 'cannot get a token: ...', 'signed out',
   * ...; or, offline, 'tls': the gateway's certificate was not accepted, or the TLS
   * handshake failed (node's `ws` only: a browser tells nothing, so there it is
   * 'connection lost'). Retried with the backoff like the others (trust fixed, it
   * connects). */
  reason: string;
  /** With reason 'tls' only: the TLS error's text and code, e.g. 'self-signed certificate
   * (DEPTH_ZERO_SELF_SIGNED_CERT)', 'certificate has expired (CERT_HAS_EXPIRED)',
   * 'TLS handshake failed: wrong version number (EPROTO)'. */
  error?: string;
  /** Reconnect attempts so far. */
  attempt: number;
  /** Date.now() of the next attempt, when offline. */
  retryAt: number;
}
export interface ViewDetail {
  gid: string;
  reset: boolean;
  upserts: ViewEntry[];
  removes: string[];
  meta: ViewMeta;
}
export interface NoticeDetail {
  kind: string;
  code: string;
  msg: string;
  gid?: string;
}

/** The client's events, each a CustomEvent with this detail. */
export interface GwClientEventMap {
  /** The connection changed. */
  state: CustomEvent<StateDetail>;
  /** What the user's pending sends say of the gateway's store changed (storeState). */
  store: CustomEvent<{ state: StoreState }>;
  /** The group list, an unread count or a membership changed. */
  groups: CustomEvent<Record<string, never>>;
  /** A join of this page was answered: the group is in the list now. */
  joined: CustomEvent<{ gid: string }>;
  /** The messages of a group with a view changed. */
  view: CustomEvent<ViewDetail>;
  /** Something the user should be told (an error). */
  notice: CustomEvent<NoticeDetail>;
  /** The token was refused and cannot be renewed: sign in again. */
  auth: CustomEvent<{ reason: string }>;
  /** A message's receipts: a reply to receipts(), or a watched message's that changed. */
  receipts: CustomEvent<Receipts>;
  /** Members of a watched small group moved their cursors (the receipts of the watched
   * messages they may have changed follow as 'receipts' events). */
  cursors: CustomEvent<{ gid: string; cursors: Cursor[] }>;
  /** A group's presence: a reply to presence(), or a subscribed group's changed. */
  presence: CustomEvent<Presence>;
  /** Members of a subscribed group came online or went (as the gateway pushed it). */
  online: CustomEvent<{ gid: string; changes: PresenceMember[] }>;
  /** Who is typing in a group now: one started, stopped (its ttl ran out, or its
   * message came). Other users only. */
  typing: CustomEvent<{ gid: string; uids: string[] }>;
  /** A message was edited (a reply to edit(), or pushed: another member's, or this
   * user's other tab or device). Only a version newer than the one known; the view's
   * entry changes too (a 'view' event). */
  edited: CustomEvent<MessageVersion>;
  /** A message was recalled, likewise. */
  recalled: CustomEvent<MessageVersion>;
  /** A reaction was set or cleared: the answer to react() (also a duplicate), or pushed
   * (another member's, or this user's other session). The view's entry changes too. */
  reacted: CustomEvent<Reacted>;
  /** A `changes` reply was applied to a group's view (its entries changed by 'view'
   * events). */
  changes: CustomEvent<ChangesDetail>;
}

export interface GwClientOptions {
  /** ws:// or wss:// URL of the gateway's /ws. */
  url: string;
  /** A token (HS256 JWT whose sub is the user); refresh: the last one is spent (refused, or
   * signedOut: its session was signed out by the application, close 4003). A new token, or
   * a rejection (or the same token) to stop: a spent token is never said again. */
  getToken: (opts: { refresh: boolean; signedOut: boolean }) => Promise<string>;
  /** The WebSocket class: the browser's by default; node's `ws` package works too (a
   * subclass can pass it options, e.g. `ca` to trust a development CA). */
  WebSocketImpl?: typeof WebSocket | (new (url: string, protocol: string) => unknown);
}

/**
 * The client: one user's session, reconnecting by itself. It keeps each group's
 * watermark, dedups by (gid, mid), acks in batches as the gateway's welcome asks, fills
 * holes by pull, resends pending messages with their cid after a reconnect, and tells
 * other tabs of the same user (BroadcastChannel) what it acked and read. It also
 * marks what the person has seen (read), and keeps receipts, presence and who is
 * typing current for the page; it edits and recalls the user's messages, and keeps
 * each message at the highest version seen.
 */
export declare class GwClient extends EventTarget {
  constructor(options: GwClientOptions);
  readonly state: ConnectionState;
  readonly reason: string;
  /** The last state's error (StateDetail.error): set while reason is 'tls'. */
  readonly error: string | undefined;
  /** What the user's pending sends say of the gateway's store (a 'store' event when it
   * changes). */
  readonly storeState: StoreState;
  /** From the welcome (null before the first one). */
  readonly uid: string | null;
  /** The session id the gateway gave (null before the first welcome). */
  readonly sid: string | null;
  readonly ackEvery: number;
  readonly ackDelayMs: number;
  readonly maxBody: number;
  readonly openGid: string | null;
  /** The last group list (welcome or groups) left out the groups of a database of the
   * gateway's that is away: those already known are kept, and a 'groups' event follows
   * once the gateway pushes the whole list. */
  readonly groupsPartial: boolean;

  /** Connect (and keep reconnecting until stop). */
  start(): void;
  /** Close for good: acks the open group first. */
  stop(): void;
  /** Skip the rest of the backoff wait. */
  reconnectNow(): void;

  /** Groups sorted by id, each with its unread count. */
  groupList(): GroupSummary[];
  /** Join a group (created when the gateway allows it). Throws for an invalid id. */
  join(gid: string): void;
  leave(gid: string): void;
  refreshGroups(): void;

  /** Open a group's view: the first time `enter` (pull after the stored ack), later a
   * pull after the watermark. Only one view is open at a time. */
  open(gid: string): void;
  /** Leave the open view: acks it at once. */
  close(): void;
  /** Ack the open group now (the page is being hidden or unloaded). */
  flushOpen(reason?: string): void;
  /** Pull older history of the open group; false when there is none to pull now (the
   * group's start, or its horizon: viewMeta's olderGone says which). */
  loadOlder(): boolean;
  viewEntries(gid: string): ViewEntry[];
  viewMeta(gid: string): ViewMeta;

  /** Send a text message; its cid. Pending until `sent`, resent after a reconnect with
   * the same cid (stored once). Throws when over the gateway's max_body. */
  send(gid: string, text: string): string;
  /** Try a failed message again (same cid). */
  retry(cid: string): void;
  /** Forget a failed message. */
  discard(cid: string): void;

  /** Replace the body of the user's own stored message mid of gid. It names the version
   * it makes (the highest known + 1), so that it is stored once however often it is
   * sent: while offline it waits and is sent after the reconnect. Resolves with the new
   * version (also an 'edited' event); rejects with a GwRequestError: unauthorized (not
   * the sender, or the edit window has passed), bad_field (no such message, or it was
   * recalled), conflict (another device made that version first: the message is pulled
   * again, so edit again), not_member, too_large, or 'offline' once signed out. */
  edit(gid: string, mid: number, text: string): Promise<MessageVersion>;
  /** Recall (delete) the user's own message mid of gid for everyone: it stays as a
   * tombstone with no body. Resolves with its version (also a 'recalled' event); rejects
   * like edit. */
  recall(gid: string, mid: number): Promise<MessageVersion>;
  /** The highest version of a message known here (0: as sent, or not known). */
  versionOf(gid: string, mid: number): number;

  /** Set (on: true, the default) or clear the user's reaction `key` (1 to 32 bytes of
   * UTF-8, no control characters: an emoji) on message mid of gid. Idempotent: while
   * offline it waits and is sent after the reconnect. Resolves with the gateway's answer
   * (also a 'reacted' event); rejects with a GwRequestError: bad_field (a bad key, no
   * such message, or a recalled one), too_large (the message has 20 keys), not_member,
   * or 'offline' once signed out. */
  react(gid: string, mid: number, key: string, on?: boolean): Promise<Reacted>;
  /** The reactions of a held message ([] when none, or not held). */
  reactionsOf(gid: string, mid: number): Reaction[];
  /** The group's change cursor: every change up to this cseq is applied to what its view
   * holds; null while it has none (never opened here, or an older gateway). */
  changeCursor(gid: string): number | null;

  /** The person has seen every message of gid up to mid (cumulative: a lower mid
   * changes nothing). Sent in batches like the acks, and at once when the view is left;
   * the group's unread counts from it from then on. */
  markRead(gid: string, mid: number): void;
  /** The receipts of one message (also reported as a 'receipts' event). Rejects with a
   * GwRequestError. */
  receipts(gid: string, mid: number): Promise<Receipts>;
  /** Keep these messages' receipts current ('receipts' events): asked for at once, then
   * again as members move. Up to 16 mids (the newest kept) in up to 16 groups (a 17th
   * throws a RangeError); again replaces the mids; [] is unwatch. Kept across
   * reconnects. */
  watch(gid: string, mids: number[]): void;
  unwatch(gid: string): void;
  /** The last receipts known of a watched message. */
  receiptsOf(gid: string, mid: number): Receipts | undefined;
  /** Who of gid's members is online. subscribe: true keeps it current ('presence'
   * events, also after reconnects), false stops that. Rejects with a GwRequestError. */
  presence(gid: string, options?: { subscribe?: boolean }): Promise<Presence>;
  /** The last presence known of gid (current while subscribed). */
  presenceOf(gid: string): Presence | undefined;
  /** The user is typing in gid: tells the others, at most once every 2 s (more often
   * is dropped here). True when it was sent. */
  typing(gid: string): boolean;
  /** Other users typing in gid now (each forgotten after the ttl the gateway gave). */
  typingIn(gid: string): string[];

  addEventListener<K extends keyof GwClientEventMap>(
    type: K,
    listener: (ev: GwClientEventMap[K]) => void,
    options?: boolean | AddEventListenerOptions,
  ): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
}

/**
 * One group's log: pure logic, no socket and no timers (the caller passes the time).
 * held is the dedup by mid; w the contiguous watermark (null until the first page);
 * only w is ever acked.
 */
export declare class GroupLog {
  held: Map<number, StoredMessage>;
  w: number | null;
  lowest: number | null;
  hasOlder: boolean;
  ackedTo: number;
  unacked: number;
  firstUnackedAt: number;
  firstUnread: number | null;
  /** The group's horizon as last heard (retention): lower mids were deleted (1: none). */
  firstMid: number;
  constructor();
  /** The lowest mid held, or w + 1 when nothing is: `pull before` it for older history. */
  lowestShown(): number;
  /** The horizon moved up to firstMid (never down): a watermark below it steps to
   * firstMid - 1 (those mids never come), dropping the messages held from before that
   * gap, and no older history is left past it. The mids dropped, or null when the
   * horizon did not move. */
  horizon(firstMid: number): number[] | null;
  /** The lowest mid held is at or below a horizon above 1: the messages before it were
   * deleted by retention. */
  olderGone(): boolean;
  /** The lowest mid held is above the horizon (and above 1): older history exists. */
  olderExists(): boolean;
  /** Keeps m unless it is held already (or is a lone push below what is held). */
  hold(m: StoredMessage, older?: boolean): 'held' | 'duplicate' | 'ignored';
  /** Replaces a held message with a later state of it (a higher cseq; at the same cseq,
   * a higher version); true when it did (a message not held is not added). */
  update(m: StoredMessage): boolean;
  /** Moves w over every contiguous message now held; how many. */
  advance(): number;
  /** Counts n newly seen messages; true when they are the first unacked ones. */
  countUnacked(n: number, nowMs: number): boolean;
  /** At least `every` messages wait for an ack. */
  ackDueByCount(every: number): boolean;
  /** The mid to ack now (w), or 0 when it says nothing new. */
  ackTarget(): number;
  /** The ack up to `to` went out. */
  acked(to?: number): void;
  /** Keeps only the newest `keep` messages. */
  trim(keep: number): void;
  /** Drops the messages held below mid (the group's horizon); the mids dropped. */
  dropBelow(mid: number): number[];
}
