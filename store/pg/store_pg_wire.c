/*
 * Talking to PostgreSQL in pipeline mode: the statements (prepared once per connection),
 * sending them with binary parameters, and reading their results, with every wait on
 * the socket bounded so that a server that stops answering cannot hold the store thread.
 *
 * A batch is a few round trips, each a run of statements ended by one Sync; parameters
 * are whole arrays in PostgreSQL's binary format (unnest turns them into rows), so the
 * number of statements does not grow with the number of ops.
 */
#include "store_pg.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IO_TIMEOUT_MS 15000 /* one round trip; past it the connection is dropped */

/* Pages: the messages after (or just before) a mid, at most $3 of them and at most $4
 * record bytes (but at least one), with the group's last mid from the same snapshot; no
 * row at all when the group does not exist. Read nearest to $2 first, so that a page
 * cut short by bytes keeps the messages nearest to where the client reads. */
/* A message's reactions as text (NULL: none): a line a key, in byte order, "COUNT MINE
 * KEY" (MINE 1: the reader $5 set it); a key holds no control character, so no '\n'. */
#define RX_SQL(gid, mid, reader)                                                                   \
    "(SELECT string_agg(k.c::text || ' ' || k.mine::int::text || ' ' || k.key, E'\\n'"             \
    " ORDER BY k.key) FROM (SELECT key, count(*) AS c, bool_or(uid = " reader ") AS mine"          \
    " FROM gw.reactions r WHERE r.gid = " gid " AND r.mid = " mid " GROUP BY key) k)"

#define PAGE_SQL(cmp, order)                                                                       \
    "SELECT g.last_mid, p.mid, p.ts, p.record, p.ver, p.ets, p.recalled::int::int8, g.first_mid,"  \
    " g.last_cseq, p.cseq, " RX_SQL(                                                               \
        "g.gid", "p.mid",                                                                          \
        "$5::text") " FROM gw.groups g LEFT JOIN LATERAL ("                                        \
                    " SELECT mid, ts, record, ver, ets, recalled, cseq FROM ("                     \
                    "  SELECT mid, ts, record, ver, ets, recalled, cseq, "                         \
                    "sum(octet_length(record)) OVER w AS run,"                                     \
                    "         row_number() OVER w AS rn FROM ("                                    \
                    "   SELECT mid, ts, record, ver, ets, recalled, cseq FROM gw.msgs"             \
                    "   WHERE gid = g.gid AND mid " cmp " $2::int8"                                \
                    "   ORDER BY mid " order " LIMIT $3::int8) x"                                  \
                    "  WINDOW w AS (ORDER BY mid " order " ROWS UNBOUNDED PRECEDING)) y"           \
                    " WHERE run <= $4::int8 OR rn = 1) p ON true"                                  \
                    " WHERE g.gid = $1::text ORDER BY p.mid " order

/* A page of changes (store.h, ST_OP_READ_CHANGES): the messages whose latest change is
 * after cseq $2, in cseq order through the partial index (gid, cseq) (its predicate
 * written out: a generic plan cannot prove it from $2), at most $3 and $4 record bytes
 * (at least one), none when the log no longer goes back to $2 (changes_first), none below
 * the horizon; with the group's figures from the same snapshot and how many there were
 * of the $3 + 1 looked at (more). No row at all when the group does not exist. */
#define CHANGES_SQL                                                                                \
    "SELECT g.last_mid, g.first_mid, g.last_cseq, g.changes_first, p.mid, p.ts, p.record,"         \
    " p.ver, p.ets, p.recalled::int::int8, p.cseq, " RX_SQL(                                       \
        "g.gid", "p.mid",                                                                          \
        "$5::text") ", p.total"                                                                    \
                    " FROM gw.groups g LEFT JOIN LATERAL ("                                        \
                    " SELECT mid, ts, record, ver, ets, recalled, cseq, total FROM ("              \
                    "  SELECT mid, ts, record, ver, ets, recalled, cseq, "                         \
                    "sum(octet_length(record)) OVER w AS run,"                                     \
                    "         row_number() OVER w AS rn, count(*) OVER () AS total FROM ("         \
                    "   SELECT mid, ts, record, ver, ets, recalled, cseq FROM gw.msgs"             \
                    "   WHERE gid = g.gid AND cseq > 0 AND cseq > $2::int8 AND mid >= g.first_mid" \
                    "   AND $2::int8 + 1 >= g.changes_first ORDER BY cseq LIMIT $3::int8 + 1) x"   \
                    "  WINDOW w AS (ORDER BY cseq ROWS UNBOUNDED PRECEDING)) y"                    \
                    " WHERE (run <= $4::int8 OR rn = 1) AND rn <= $3::int8) p ON true"             \
                    " WHERE g.gid = $1::text ORDER BY p.cseq"

const char *const pg_stmt_sql[PG_N_STMTS] = {
    /* A batch's groups, locked in key order until it commits ('g': gid, last_mid,
     * created_ms). Then, in a statement of its own (a new snapshot, taken once the locks
     * are held: a lock waited for may have been a writer's that changed them), every
     * other row it will read: memberships ('m': gid, uid, ack, joined_ms) and (uid, cid)
     * rows ('s': uid, cid, mid, ts, gid). */
    [PG_LOCK_GROUPS] = "SELECT 'g'::text, gid, NULL::text, last_mid, created_ms, NULL::text,"
                       " first_mid, last_cseq, changes_first FROM gw.groups WHERE gid = "
                       "ANY($1::text[]) ORDER BY gid"
                       " FOR UPDATE",
    [PG_READ_ROWS] = "SELECT 'm'::text, m.gid, m.uid, m.ack, m.joined_ms, NULL::text, m.read"
                     ", NULL::int8, NULL::int8 FROM gw.members m"
                     " JOIN unnest($1::text[], $2::text[]) AS k(gid, uid)"
                     " ON m.gid = k.gid AND m.uid = k.uid"
                     " UNION ALL SELECT 's', s.uid, s.cid, s.mid, s.ts, s.gid, NULL::int8,"
                     " NULL::int8, NULL::int8"
                     " FROM gw.sends s JOIN unnest($3::text[], $4::text[]) AS k(uid, cid)"
                     " ON s.uid = k.uid AND s.cid = k.cid",
    /* The fast path's check (store_pg_cache.c), raising GW001 when the cache was wrong. */
    [PG_EXPECT] = "SELECT gw.expect($1::text[], $2::int8[], $3::text[], $4::text[])",
    /* The writes: each over arrays sorted by key, so that two writers take their row
     * locks in one order. */
    /* last_cseq only moves up: the fast path's cached row may be older than another
     * writer's change (the fast path appends, which take no cseq). */
    [PG_UPD_GROUPS] =
        "UPDATE gw.groups g SET last_mid = v.last_mid,"
        " last_cseq = greatest(g.last_cseq, v.last_cseq)"
        " FROM unnest($1::text[], $2::int8[], $3::int8[]) AS v(gid, last_mid, last_cseq)"
        " WHERE g.gid = v.gid",
    [PG_INS_GROUPS] = "INSERT INTO gw.groups (gid, last_mid, created_ms)"
                      " SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[])",
    [PG_INS_MEMBERS] = "INSERT INTO gw.members (gid, uid, ack, joined_ms, read) SELECT * FROM"
                       " unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[])",
    /* An ack and a read only move forward, also past what another writer stored
     * meanwhile (a read of -1: the batch has none, and leaves it). */
    [PG_UPD_MEMBERS] =
        "UPDATE gw.members m SET ack = greatest(m.ack, v.ack), joined_ms = v.joined_ms,"
        " read = greatest(m.read, v.read)"
        " FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[])"
        " AS v(gid, uid, ack, joined_ms, read) WHERE m.gid = v.gid AND m.uid = v.uid",
    [PG_DEL_MEMBERS] = "DELETE FROM gw.members m USING unnest($1::text[], $2::text[])"
                       " AS v(gid, uid) WHERE m.gid = v.gid AND m.uid = v.uid",
    [PG_INS_SENDS] = "INSERT INTO gw.sends (uid, cid, gid, mid, ts) SELECT * FROM"
                     " unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[])",
    [PG_INS_MSGS] = "INSERT INTO gw.msgs (gid, mid, ts, record)"
                    " SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::bytea[])",
    [PG_PAGE_AFTER] = PAGE_SQL(">", "ASC"),
    [PG_PAGE_BEFORE] = PAGE_SQL("<", "DESC"),
    [PG_CHANGES] = CHANGES_SQL,
    /* A user's groups and its not-before (NULL: none), from one snapshot: one row at least,
     * a NULL gid when it has no group. */
    [PG_USER_GROUPS] = "SELECT m.gid, g.last_mid, m.ack, m.read, g.first_mid, r.not_before,"
                       " g.last_cseq"
                       " FROM (SELECT $1::text AS uid) u LEFT JOIN gw.revoked r ON r.uid = u.uid"
                       " LEFT JOIN (gw.members m JOIN gw.groups g ON g.gid = m.gid)"
                       " ON m.uid = u.uid",
    [PG_GROUP] = "SELECT g.last_mid, m.ack, m.read, g.first_mid, g.keep_msgs, g.keep_ms,"
                 " g.cap_msgs, g.acked::int8, g.last_cseq FROM gw.groups g LEFT JOIN gw.members m"
                 " ON m.gid = g.gid AND m.uid = $2::text WHERE g.gid = $1::text",
    /* A page of a group's members after uid $2 ('': from the first), $3 of them and one
     * more (that tells whether there are more), with the group's last mid from the same
     * snapshot; no row at all when the group does not exist. uid is COLLATE "C": byte
     * order, one range of the primary key (gid, uid). The rows come in no promised
     * order: the page sorts them (st_members_finish), so the database need not. */
    [PG_MEMBERS] = "SELECT g.last_mid, m.uid, m.ack, m.read FROM gw.groups g LEFT JOIN LATERAL"
                   " (SELECT uid, ack, read FROM gw.members WHERE gid = g.gid AND uid > $2::text"
                   " ORDER BY uid LIMIT $3::int8 + 1) m ON true WHERE g.gid = $1::text",
    /* The batch's announcement (store_pg_events.c), delivered at its commit. The
     * function scan yields the payloads in array order: they are announced in it. */
    [PG_NOTIFY] = "SELECT count(pg_notify('gw_feed', x)) FROM unnest($1::text[]) AS x",
    [PG_COUNT] = "SELECT count(*)::int8, coalesce(sum(last_mid - first_mid + 1), 0)::int8"
                 " FROM gw.groups",
    [PG_SIZE] = "SELECT pg_database_size(current_database())::int8",
    [PG_RECOVERY] = "SELECT pg_is_in_recovery()",
    [PG_BEGIN] = "BEGIN",
    [PG_COMMIT] = "COMMIT",
    [PG_ROLLBACK] = "ROLLBACK",
    /* The same in a transaction of its own after the batch's COMMIT (the implicit one
     * the Sync ends), whose commit need not wait for the WAL's flush (nothing in it is
     * data): the lock PostgreSQL holds on the notification queue from before a
     * notifying commit until after it is then held briefly. */
    [PG_NOTIFY_AFTER] = "SELECT count(pg_notify('gw_feed', x)) FROM"
                        " (SELECT set_config('synchronous_commit', 'off', true)) s,"
                        " unnest($1::text[]) AS x",
    /* The batch's row(s) of the change log (store_pg_feed.c reads them back), the last
     * statement of its transaction: the sequence is drawn once its locks are held. */
    [PG_LOG] = "INSERT INTO gw.changes (body) SELECT x FROM unnest($1::text[]) AS x",
    /* Rows of the change log older than the window ($1: ms since the epoch) go; the
     * greatest xid gone is kept, so that a listener whose position is older knows that
     * it cannot catch up from the log. At most 10,000 rows a time; answers how many. */
    [PG_PRUNE] = "WITH d AS (DELETE FROM gw.changes WHERE ctid = ANY(ARRAY("
                 " SELECT ctid FROM gw.changes WHERE at_ms < $1::int8 LIMIT 10000)) RETURNING xid),"
                 " u AS (UPDATE gw.changes_pruned SET xid = greatest(xid, (SELECT max(xid) FROM d))"
                 " WHERE EXISTS (SELECT 1 FROM d))"
                 " SELECT count(*)::int8 FROM d",
    /* Tells older than they are kept ($1), 10,000 at most a time. */
    [PG_PRUNE_TELLS] = "DELETE FROM gw.unread_tells WHERE ctid = ANY(ARRAY("
                       " SELECT ctid FROM gw.unread_tells WHERE made_ms < $1::int8 LIMIT 10000))",
    /* The unread webhook's bookkeeping (store_pg_unread.c). A claim inserts the ids in
     * key order (two gateways claiming the same ones wait on each other, never
     * deadlock); those it made come back. */
    [PG_TELL_CLAIM] = "INSERT INTO gw.unread_tells (id, owner, made_ms, event)"
                      " SELECT i, $2::int8, $3::int8, e FROM unnest($1::text[], $4::text[])"
                      " AS k(i, e) ORDER BY i ON CONFLICT DO NOTHING RETURNING id",
    [PG_TELL_SENT] = "UPDATE gw.unread_tells SET sent = true"
                     " WHERE id = ANY($1::text[]) AND NOT sent",
    /* Tells not taken whose owner is gone: each gateway holds the advisory lock of its
     * owner number on its connection for as long as it is connected, so a lock that can
     * be taken (for this transaction only) is a gateway's that is no more. Rows another
     * adopter holds are passed over. */
    [PG_TELL_ADOPT] = "UPDATE gw.unread_tells t SET owner = $1::int8 FROM ("
                      " SELECT id FROM gw.unread_tells WHERE NOT sent AND owner <> $1::int8"
                      " AND made_ms <= $2::int8 AND pg_try_advisory_xact_lock(owner)"
                      " ORDER BY made_ms LIMIT $3::int8 FOR UPDATE SKIP LOCKED) x"
                      " WHERE t.id = x.id RETURNING t.event",
    /* The mark moves only from where it is ($2 - 1 or past it); a group with none has
     * one from its first message. */
    [PG_SWEPT] = "WITH u AS (UPDATE gw.unread_swept SET mid = $3::int8 WHERE gid = $1::text"
                 " AND mid + 1 >= $2::int8 AND mid < $3::int8 RETURNING 1)"
                 " INSERT INTO gw.unread_swept (gid, mid) SELECT $1::text, $3::int8"
                 " WHERE $2::int8 <= 1 AND NOT EXISTS (SELECT 1 FROM gw.unread_swept"
                 " WHERE gid = $1::text) ON CONFLICT DO NOTHING",
    /* The groups the change log's rows of ($1, $2] stored messages of ("h GID HI 0 LO"
     * lines; LO is missing from rows of a release before it), in gid order after $3,
     * $4 of them and one more (which says there are more), with their swept marks. */
    [PG_UNSWEPT] =
        "WITH l AS (SELECT split_part(x, ' ', 2) COLLATE \"C\" AS gid,"
        " split_part(x, ' ', 3)::int8 AS hi, nullif(split_part(x, ' ', 5), '')::int8 AS lo"
        " FROM gw.changes c, regexp_split_to_table(c.body, E'\\n') AS x"
        " WHERE c.at_ms > $1::int8 AND c.at_ms <= $2::int8 AND x LIKE 'h %'),"
        " g AS (SELECT gid, coalesce(min(lo), min(hi)) AS lo, max(hi) AS hi FROM l"
        " WHERE gid > $3::text GROUP BY gid ORDER BY gid LIMIT $4::int8 + 1)"
        " SELECT g.gid, g.lo, g.hi, coalesce(s.mid, 0) FROM g"
        " LEFT JOIN gw.unread_swept s ON s.gid = g.gid ORDER BY g.gid",
    /* last_seen only moves forward; uids sorted (two writers lock in one order). */
    [PG_UPS_SEEN] = "INSERT INTO gw.users AS u (uid, last_seen_ms)"
                    " SELECT * FROM unnest($1::text[], $2::int8[])"
                    " ON CONFLICT (uid) DO UPDATE SET last_seen_ms ="
                    " greatest(u.last_seen_ms, excluded.last_seen_ms)",
    [PG_READ_SEEN] = "SELECT uid, last_seen_ms FROM gw.users WHERE uid = ANY($1::text[])",
    /* A not-before only moves forward, the same way. */
    [PG_UPS_NBF] = "INSERT INTO gw.revoked AS r (uid, not_before)"
                   " SELECT * FROM unnest($1::text[], $2::int8[])"
                   " ON CONFLICT (uid) DO UPDATE SET not_before ="
                   " greatest(r.not_before, excluded.not_before)",
    /* A signal (store.h): a NOTIFY in a transaction of its own with nothing else in it,
     * whose commit need not wait for the WAL's flush. */
    [PG_SIGNAL] = "SELECT pg_notify('gw_feed', $1::text)"
                  " FROM (SELECT set_config('synchronous_commit', 'off', true)) s",
    /* Later versions of messages (store_pg_edit.c): the batch's messages as stored (their
     * groups are locked: no other writer changes them meanwhile), and the versions it
     * made, over arrays in key order. */
    [PG_READ_MSGS] = "SELECT m.gid, m.mid, m.ts, m.ver, m.ets, m.recalled::int::int8, m.record,"
                     " m.cseq, " RX_SQL(
                         "m.gid", "m.mid",
                         "''") " FROM gw.msgs m JOIN unnest($1::text[], $2::int8[]) AS k(gid, mid)"
                               " ON m.gid = k.gid AND m.mid = k.mid",
    /* A change moves the message's one entry in the change log (its cseq, made at cts);
     * a version 0: only that moved (a reaction), the rest stays. */
    [PG_UPD_MSGS] = "UPDATE gw.msgs m SET ver = CASE WHEN v.ver > 0 THEN v.ver ELSE m.ver END,"
                    " ets = CASE WHEN v.ver > 0 THEN v.ets ELSE m.ets END,"
                    " recalled = CASE WHEN v.ver > 0 THEN v.recalled = 1 ELSE m.recalled END,"
                    " record = CASE WHEN v.ver > 0 THEN v.record ELSE m.record END,"
                    " cseq = v.cseq, cts = v.cts"
                    " FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[],"
                    " $6::bytea[], $7::int8[], $8::int8[]) AS v(gid, mid, ver, ets, recalled,"
                    " record, cseq, cts) WHERE m.gid = v.gid AND m.mid = v.mid",
    /* Reactions (store_pg_react.c): the batch's (gid, mid, uid, key) rows as stored, and
     * those it set or cleared, over arrays in key order. */
    [PG_READ_RX] = "SELECT r.gid, r.mid, r.uid, r.key FROM gw.reactions r"
                   " JOIN unnest($1::text[], $2::int8[], $3::text[], $4::text[])"
                   " AS k(gid, mid, uid, key) ON r.gid = k.gid AND r.mid = k.mid"
                   " AND r.key = k.key AND r.uid = k.uid",
    [PG_INS_RX] = "INSERT INTO gw.reactions (gid, mid, key, uid) SELECT gid, mid, key, uid"
                  " FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[])"
                  " AS v(gid, mid, uid, key) ON CONFLICT DO NOTHING",
    [PG_DEL_RX] = "DELETE FROM gw.reactions r USING unnest($1::text[], $2::int8[], $3::text[],"
                  " $4::text[]) AS v(gid, mid, uid, key) WHERE r.gid = v.gid AND r.mid = v.mid"
                  " AND r.key = v.key AND r.uid = v.uid",
    /* Shards: a write transaction's first statement (store_pg_fence.c). */
    [PG_FENCED] = "SELECT gw.fenced($1::int8[])",
    /* A recall drops the message's reactions (in the batch's transaction). */
    [PG_DEL_RX_MSGS] = "DELETE FROM gw.reactions r USING unnest($1::text[], $2::int8[])"
                       " AS v(gid, mid) WHERE r.gid = v.gid AND r.mid = v.mid",
    /* A person's erasure (store_pg_erase.c): the groups of its messages, memberships and
     * reactions locked in key order; then its rows gone, its messages tombstones ($2,
     * made at $3) without their reactions, its reactions gone everywhere, each change
     * taking its group's next cseq as RocksDB takes them (the tombstones first, one each,
     * in mid order; then one per reaction of the person's dropped from a message that
     * stays; a message's entry the last of its own), the groups' last_cseq moved, the leaves and
     * the groups changed written to the change log ($4: its header); answers the messages erased,
     * the groups left (separated by spaces), the rows of other kinds changed, and the groups
     * changed with their last cseq ("GID CSEQ" pairs, separated by spaces). */
    [PG_ERASE_LOCK] = "SELECT gid FROM gw.groups WHERE gid IN (SELECT gid FROM gw.sends"
                      " WHERE uid = $1::text UNION SELECT gid FROM gw.members WHERE uid = $1::text"
                      " UNION SELECT gid FROM gw.reactions WHERE uid = $1::text)"
                      " ORDER BY gid FOR UPDATE",
    [PG_ERASE] =
        "WITH s AS (DELETE FROM gw.sends WHERE uid = $1::text RETURNING gid, mid),"
        " x AS (DELETE FROM gw.reactions WHERE uid = $1::text RETURNING gid, mid),"
        " a AS (SELECT m.gid, m.mid, bool_or(t.tomb) AS tomb,"
        "  count(*) FILTER (WHERE NOT t.tomb) AS nr FROM (SELECT gid, mid, true AS tomb"
        "  FROM s UNION ALL SELECT gid, mid, false FROM x) t JOIN gw.msgs m ON m.gid = t.gid"
        "  AND m.mid = t.mid WHERE NOT m.recalled GROUP BY m.gid, m.mid),"
        " n AS (SELECT a.gid, a.mid, a.tomb, g.last_cseq + sum(CASE WHEN a.tomb THEN 1"
        "  ELSE a.nr END) OVER (PARTITION BY a.gid ORDER BY a.tomb DESC, a.mid"
        "  ROWS UNBOUNDED PRECEDING)::int8 AS cseq FROM a JOIN gw.groups g ON g.gid = a.gid),"
        " e AS (UPDATE gw.msgs m SET cseq = n.cseq, cts = $3::int8,"
        "  record = CASE WHEN n.tomb THEN $2::bytea ELSE m.record END,"
        "  ver = m.ver + n.tomb::int, ets = CASE WHEN n.tomb THEN $3::int8 ELSE m.ets END,"
        "  recalled = m.recalled OR n.tomb FROM n WHERE m.gid = n.gid AND m.mid = n.mid"
        "  RETURNING n.gid, n.cseq, n.tomb),"
        " d AS (DELETE FROM gw.reactions r USING n WHERE n.tomb AND r.gid = n.gid"
        "  AND r.mid = n.mid AND r.uid <> $1::text RETURNING 1),"
        " c AS (UPDATE gw.groups g SET last_cseq = h.hi FROM (SELECT gid, max(cseq) AS hi FROM e"
        "  GROUP BY gid) h WHERE g.gid = h.gid RETURNING g.gid, h.hi),"
        " l AS (DELETE FROM gw.members WHERE uid = $1::text RETURNING gid),"
        " u AS (DELETE FROM gw.users WHERE uid = $1::text RETURNING 1),"
        " nb AS (INSERT INTO gw.revoked AS r (uid, not_before) VALUES ($1::text,"
        "  $3::int8 / 1000) ON CONFLICT (uid) DO UPDATE SET not_before ="
        "  greatest(r.not_before, excluded.not_before) RETURNING 1),"
        " w AS (INSERT INTO gw.changes (body) SELECT $4::text"
        "  || coalesce((SELECT string_agg(E'\\nl ' || gid || ' ' || $1::text, '' ORDER BY gid)"
        "  FROM l), '') || coalesce((SELECT string_agg(E'\\nc ' || gid || ' ' || hi::text, ''"
        "  ORDER BY gid) FROM c), '')"
        "  WHERE EXISTS (SELECT 1 FROM l) OR EXISTS (SELECT 1 FROM c) RETURNING 1)"
        " SELECT (SELECT count(*) FROM e WHERE tomb)::int8,"
        " (SELECT coalesce(string_agg(gid, ' ' ORDER BY gid), '') FROM l),"
        " (SELECT count(*) FROM u)::int8 + (SELECT count(*) FROM w)::int8"
        " + (SELECT count(*) FROM d)::int8,"
        " (SELECT coalesce(string_agg(gid || ' ' || hi::text, ' ' ORDER BY gid), '') FROM c)",
    /* A group's deletion: its row locked, then all of it gone, the leaves written to the
     * change log with the deletion's cseq ($2: its header); answers its last mid (NULL: no
     * such group), its members (separated by spaces), the rows of other kinds deleted and
     * the deletion's cseq (its last_cseq + 1). */
    [PG_DROP_LOCK] = "SELECT last_mid FROM gw.groups WHERE gid = $1::text FOR UPDATE",
    [PG_DROP_GROUP] =
        "WITH g AS (DELETE FROM gw.groups WHERE gid = $1::text RETURNING last_mid, last_cseq),"
        " m AS (DELETE FROM gw.msgs WHERE gid = $1::text RETURNING 1),"
        " l AS (DELETE FROM gw.members WHERE gid = $1::text RETURNING uid),"
        " s AS (DELETE FROM gw.sends WHERE gid = $1::text RETURNING 1),"
        " w AS (DELETE FROM gw.unread_swept WHERE gid = $1::text RETURNING 1),"
        " x AS (DELETE FROM gw.reactions WHERE gid = $1::text RETURNING 1),"
        " c AS (INSERT INTO gw.changes (body) SELECT $2::text || string_agg(E'\\nl ' ||"
        " $1::text || ' ' || uid || ' ' || (SELECT last_cseq + 1 FROM g)::text, '' ORDER BY uid)"
        " FROM l HAVING count(*) > 0 RETURNING 1)"
        " SELECT (SELECT last_mid FROM g), (SELECT coalesce(string_agg(uid, ' ' ORDER BY uid),"
        " '') FROM l), (SELECT count(*) FROM m)::int8 + (SELECT count(*) FROM s)::int8 +"
        " (SELECT count(*) FROM w)::int8 + (SELECT count(*) FROM c)::int8"
        " + (SELECT count(*) FROM x)::int8, (SELECT last_cseq + 1 FROM g)",
    /* Retention (store_pg_trim.c). A group's own ($2..$5: messages, ms, cap, until_acked;
     * ST_KEEP_ALL is -1 here); a row back when the group exists. */
    [PG_RETAIN] =
        "UPDATE gw.groups SET keep_msgs = $2::int8, keep_ms = $3::int8,"
        " cap_msgs = $4::int8, acked = $5::int8::smallint WHERE gid = $1::text RETURNING 1",
    /* A pass's page of groups after $1 ('': from the first), $2 of them and one more, each
     * with its own retention and what the rules need (store_retain.c): the first mid from
     * its horizon, at most ST_TRIM_STEP on, sent at or after $4 (now) less its age limit
     * ($3: the default; NULL when it has none), and its members' lowest ack ($5: until
     * acked by default; NULL unless it keeps until acked). */
    [PG_TRIM_READ] =
        "SELECT g.gid, g.last_mid, g.first_mid, g.keep_msgs, g.keep_ms, g.cap_msgs, g.acked::int8,"
        " CASE WHEN e.ms > 0 THEN coalesce((SELECT min(m.mid) FROM gw.msgs m WHERE m.gid = g.gid"
        "  AND m.mid >= g.first_mid AND m.mid <= g.first_mid + 10000 AND m.ts >= $4::int8 - e.ms),"
        "  least(g.last_mid, g.first_mid + 10000) + 1) END,"
        " CASE WHEN e.acked THEN (SELECT min(ack) FROM gw.members WHERE gid = g.gid) END,"
        /* The retention of changes: the group's cseqs, and by age ($6 ms, 0: none) the last
         * entry of the log older than that (NULL: none), the one before the first young
         * enough to keep (found walking the log from its start). */
        " g.last_cseq, g.changes_first,"
        " CASE WHEN $6::int8 > 0 THEN (SELECT o.cseq FROM gw.msgs o WHERE o.gid = g.gid"
        "  AND o.cseq > 0 AND o.cseq >= g.changes_first AND o.cseq < coalesce((SELECT y.cseq"
        "  FROM gw.msgs y WHERE y.gid = g.gid AND y.cseq > 0 AND y.cseq >= g.changes_first"
        "  AND y.cts >= $4::int8 - $6::int8 ORDER BY y.cseq LIMIT 1), g.last_cseq + 1)"
        "  ORDER BY o.cseq DESC LIMIT 1) END"
        " FROM gw.groups g, LATERAL (SELECT CASE WHEN g.keep_ms = 0 THEN $3::int8"
        "  ELSE g.keep_ms END AS ms, (g.acked = 1 OR (g.acked = 0 AND $5::int8 = 1)) AS acked) e"
        " WHERE g.gid > $1::text ORDER BY g.gid LIMIT $2::int8 + 1",
    /* One group's trim, a statement of its own: its row locked first (as a batch locks
     * it: no deadlock with one), as it is now (another gateway's pass may have been
     * first); the horizon moves up to $2, taking the group's next cseq, and the messages
     * below it go with their (uid, cid) rows and reactions; the start of the change log
     * moves up to $3; a horizon moved is written to the change log ($4: its header).
     * Answers the messages deleted and the new last cseq (NULL: the horizon did not move). */
    [PG_TRIM] = "WITH o AS (SELECT first_mid, last_cseq, changes_first FROM gw.groups"
                " WHERE gid = $1::text FOR UPDATE),"
                " h AS (UPDATE gw.groups g SET first_mid = greatest(o.first_mid, $2::int8),"
                " last_cseq = o.last_cseq + (o.first_mid < $2::int8)::int,"
                " changes_first = greatest(o.changes_first, $3::int8) FROM o"
                " WHERE g.gid = $1::text AND (o.first_mid < $2::int8 OR o.changes_first < $3::int8)"
                " RETURNING o.first_mid AS lo, g.last_cseq, o.first_mid < $2::int8 AS moved),"
                " d AS (DELETE FROM gw.msgs WHERE gid = $1::text AND mid < $2::int8"
                " AND mid >= (SELECT lo FROM h WHERE moved) RETURNING 1),"
                " s AS (DELETE FROM gw.sends WHERE gid = $1::text AND mid < $2::int8"
                " AND mid >= (SELECT lo FROM h WHERE moved)),"
                " x AS (DELETE FROM gw.reactions WHERE gid = $1::text AND mid < $2::int8"
                " AND mid >= (SELECT lo FROM h WHERE moved)),"
                " c AS (INSERT INTO gw.changes (body) SELECT $4::text || E'\\nc ' || $1::text"
                " || ' ' || last_cseq::text FROM h WHERE moved)"
                " SELECT (SELECT count(*) FROM d)::int8, (SELECT last_cseq FROM h WHERE moved)",
};

const char *const pg_stmt_name[PG_N_STMTS] = {
    [PG_LOCK_GROUPS] = "gw_lock_groups",
    [PG_READ_ROWS] = "gw_read_rows",
    [PG_EXPECT] = "gw_expect",
    [PG_UPD_GROUPS] = "gw_upd_groups",
    [PG_INS_GROUPS] = "gw_ins_groups",
    [PG_INS_MEMBERS] = "gw_ins_members",
    [PG_UPD_MEMBERS] = "gw_upd_members",
    [PG_DEL_MEMBERS] = "gw_del_members",
    [PG_INS_SENDS] = "gw_ins_sends",
    [PG_INS_MSGS] = "gw_ins_msgs",
    [PG_PAGE_AFTER] = "gw_page_after",
    [PG_PAGE_BEFORE] = "gw_page_before",
    [PG_USER_GROUPS] = "gw_user_groups",
    [PG_GROUP] = "gw_group",
    [PG_MEMBERS] = "gw_members",
    [PG_NOTIFY] = "gw_notify",
    [PG_COUNT] = "gw_count",
    [PG_SIZE] = "gw_size",
    [PG_RECOVERY] = "gw_recovery",
    [PG_BEGIN] = "gw_begin",
    [PG_COMMIT] = "gw_commit",
    [PG_ROLLBACK] = "gw_rollback",
    [PG_NOTIFY_AFTER] = "gw_notify_after",
    [PG_LOG] = "gw_log",
    [PG_PRUNE] = "gw_prune",
    [PG_PRUNE_TELLS] = "gw_prune_tells",
    [PG_TELL_CLAIM] = "gw_tell_claim",
    [PG_TELL_SENT] = "gw_tell_sent",
    [PG_TELL_ADOPT] = "gw_tell_adopt",
    [PG_SWEPT] = "gw_swept",
    [PG_UNSWEPT] = "gw_unswept",
    [PG_UPS_SEEN] = "gw_ups_seen",
    [PG_UPS_NBF] = "gw_ups_nbf",
    [PG_READ_SEEN] = "gw_read_seen",
    [PG_SIGNAL] = "gw_signal",
    [PG_READ_MSGS] = "gw_read_msgs",
    [PG_UPD_MSGS] = "gw_upd_msgs",
    [PG_ERASE_LOCK] = "gw_erase_lock",
    [PG_ERASE] = "gw_erase",
    [PG_DROP_LOCK] = "gw_drop_lock",
    [PG_DROP_GROUP] = "gw_drop_group",
    [PG_RETAIN] = "gw_retain",
    [PG_TRIM_READ] = "gw_trim_read",
    [PG_TRIM] = "gw_trim",
    [PG_CHANGES] = "gw_changes",
    [PG_DEL_RX_MSGS] = "gw_del_rx_msgs",
    [PG_READ_RX] = "gw_read_rx",
    [PG_INS_RX] = "gw_ins_rx",
    [PG_DEL_RX] = "gw_del_rx",
    [PG_FENCED] = "gw_fenced",
};

/* ---- buffers and binary formats ------------------------------------------------------- */

static void buf_room(pg_buf *b, size_t n)
{
    if (b->n + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + n)
        cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = true;
        return;
    }
    b->p = np;
    b->cap = cap;
}

void pg_buf_put(pg_buf *b, const void *p, size_t n)
{
    buf_room(b, n);
    if (b->oom)
        return;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void buf_u32(pg_buf *b, uint32_t v)
{
    char x[4] = {(char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v};
    pg_buf_put(b, x, 4);
}

void pg_buf_reset(pg_buf *b)
{
    b->n = 0;
    b->oom = false;
}

void pg_buf_free(pg_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* PostgreSQL's binary array: dimensions, a has-nulls flag, the element type, the length
 * and lower bound of the one dimension, then each element as a length and its bytes. */
void pg_arr_begin(pg_buf *b, unsigned elem_oid, size_t n)
{
    pg_buf_reset(b);
    buf_u32(b, n ? 1 : 0);
    buf_u32(b, 0);
    buf_u32(b, elem_oid);
    if (n) {
        buf_u32(b, (uint32_t)n);
        buf_u32(b, 1);
    }
}

void pg_arr_bytes(pg_buf *b, const void *p, size_t n)
{
    buf_u32(b, (uint32_t)n);
    pg_buf_put(b, p, n);
}

void pg_arr_int8(pg_buf *b, uint64_t v)
{
    char x[8];
    st_put_be64(x, v);
    pg_arr_bytes(b, x, 8);
}

void pg_text(pg_buf *b, const void *p, size_t n)
{
    pg_buf_reset(b);
    pg_buf_put(b, p, n);
}

void pg_int8(pg_buf *b, uint64_t v)
{
    char x[8];
    st_put_be64(x, v);
    pg_buf_reset(b);
    pg_buf_put(b, x, 8);
}

uint64_t pg_get_int8(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
        return 0;
    return st_get_be64(PQgetvalue(r, row, col));
}

st_id pg_get_id(const PGresult *r, int row, int col)
{
    return (st_id){PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col)};
}

/* ---- round trips ------------------------------------------------------------------------ */

/* Waits until the socket is ready for what libpq needs; false on timeout or error. */
static bool wait_socket(pg *p, short events, char *why, size_t why_len)
{
    struct pollfd pfd = {.fd = PQsocket(p->conn), .events = events};
    if (pfd.fd < 0) {
        snprintf(why, why_len, "connection to the database closed");
        return false;
    }
    int rc;
    do
        rc = poll(&pfd, 1, IO_TIMEOUT_MS);
    while (rc < 0 && errno == EINTR);
    if (rc > 0)
        return true;
    snprintf(why, why_len,
             rc == 0 ? "the database did not answer within %d s"
                     : "waiting for the database failed",
             IO_TIMEOUT_MS / 1000);
    return false;
}

/* A connection that failed or timed out is closed: its state is unknown. */
static void lost(pg *p)
{
    PQfinish(p->conn);
    p->conn = NULL;
    p->in_tx = false;
    atomic_store(&p->connected, false);
}

int pg_send(pg *p, enum pg_stmt st, pg_buf *const *params, int n)
{
    const char *values[8];
    int lengths[8], formats[8];
    for (int i = 0; i < n; i++) {
        if (params[i]->oom)
            return ST_ENOMEM;
        values[i] = params[i]->p ? params[i]->p : "";
        lengths[i] = (int)params[i]->n;
        formats[i] = 1;
    }
    if (!p->conn)
        return ST_EIO;
    return PQsendQueryPrepared(p->conn, pg_stmt_name[st], n, values, lengths, formats, 1) == 1
               ? ST_OK
               : ST_EIO;
}

int pg_send_arrays(pg *p, enum pg_stmt st, pg_buf *a, int n, int *n_stmts)
{
    pg_buf *params[8] = {NULL};
    for (int i = 0; i < n; i++)
        params[i] = &a[i];
    int rc = pg_send(p, st, params, n);
    for (int i = 0; i < n; i++)
        pg_buf_free(&a[i]);
    if (rc == ST_OK && n_stmts)
        (*n_stmts)++;
    return rc;
}

int pg_sync(pg *p, char *why, size_t why_len)
{
    if (!p->conn || PQpipelineSync(p->conn) != 1) {
        pg_why(p, NULL, "sending to the database failed", why, why_len);
        if (p->conn)
            lost(p);
        return ST_EIO;
    }
    int rc;
    while ((rc = PQflush(p->conn)) == 1) {
        /* The server may be answering while we still send: read, or both could wait. */
        char mine[512] = "";
        if (!wait_socket(p, POLLIN | POLLOUT, mine, sizeof(mine)) || PQconsumeInput(p->conn) != 1) {
            if (!mine[0])
                pg_why(p, NULL, "sending to the database failed", mine, sizeof(mine));
            snprintf(why, why_len, "%s", mine);
            lost(p);
            return ST_EIO;
        }
    }
    if (rc < 0) {
        pg_why(p, NULL, "sending to the database failed", why, why_len);
        lost(p);
        return ST_EIO;
    }
    return ST_OK;
}

/* PQgetResult once libpq holds a whole result, so that it never blocks unbounded. */
static bool get(pg *p, PGresult **out, char *why, size_t why_len)
{
    while (PQisBusy(p->conn)) {
        /* why may hold a statement's error already: only a failure here replaces it. */
        char mine[512] = "";
        if (!wait_socket(p, POLLIN, mine, sizeof(mine)) || PQconsumeInput(p->conn) != 1) {
            if (!mine[0])
                pg_why(p, NULL, "connection to the database lost", mine, sizeof(mine));
            snprintf(why, why_len, "%s", mine);
            lost(p);
            return false;
        }
    }
    *out = PQgetResult(p->conn);
    return true;
}

PGresult *pg_result(pg *p, char *why, size_t why_len)
{
    PGresult *r = NULL, *end = NULL;
    if (!p->conn) {
        snprintf(why, why_len, "not connected to the database");
        return NULL;
    }
    if (!get(p, &r, why, why_len))
        return NULL;
    if (!r) {
        pg_why(p, NULL, "connection to the database lost", why, why_len);
        lost(p);
        return NULL;
    }
    /* Each statement's results end with a NULL. */
    if (!get(p, &end, why, why_len)) {
        PQclear(r);
        return NULL;
    }
    PQclear(end);
    return r;
}

int pg_end(pg *p, char *why, size_t why_len)
{
    PGresult *r = NULL;
    if (!p->conn || !get(p, &r, why, why_len))
        return ST_EIO;
    bool ok = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (!ok) {
        pg_why(p, NULL, "the database's answers went out of step", why, why_len);
        lost(p);
        return ST_EIO;
    }
    return ST_OK;
}

int pg_round_trip(pg *p, int n, int keep, PGresult **kept, bool *ok, const char *what, char *why,
                  size_t why_len)
{
    if (kept)
        *kept = NULL;
    if (pg_sync(p, why, why_len) != ST_OK)
        return ST_EIO;
    *ok = true;
    for (int i = 0; i < n; i++) {
        PGresult *r = pg_result(p, why, why_len);
        if (!r)
            return ST_EIO;
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            if (*ok && what)
                pg_why(p, r, what, why, why_len);
            *ok = false;
        }
        if (i == keep && kept)
            *kept = r;
        else
            PQclear(r);
    }
    return pg_end(p, why, why_len);
}

bool pg_retryable(const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return state && (strcmp(state, "23505") == 0 /* unique_violation */ ||
                     strcmp(state, "GW001") == 0 /* the fast path's check failed */ ||
                     strcmp(state, "GW002") == 0 /* a slot of the batch is fenced (shards) */ ||
                     strcmp(state, "55P03") == 0 /* lock_not_available (lock_timeout) */ ||
                     strcmp(state, "40P01") == 0 /* deadlock_detected */ ||
                     strcmp(state, "40001") == 0 /* serialization_failure */);
}

void pg_why(pg *p, const PGresult *r, const char *what, char *why, size_t why_len)
{
    const char *msg = r ? PQresultErrorMessage(r) : NULL;
    if (!msg || !*msg)
        msg = p->conn ? PQerrorMessage(p->conn) : "";
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    snprintf(why, why_len, "%s%s%.*s (%s)", what, n ? ": " : "", (int)n, msg, p->where);
}
