// gw-client: the protocol v1 client of the group-messaging gateway (docs/PROTOCOL.md).
// The client composes the connection and a log per group; the log and the backoff are
// exported on their own too (see index.d.ts for the types).
export { GwClient, makeCid, isValidId, bodyText } from './client.js';
export { GroupLog } from './group-log.js';
export { SUBPROTOCOL, backoffDelay } from './connection.js';
