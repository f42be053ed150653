/*
 * xmpp_stanza (tools/load/xmpp_stanza.c): gw_load --xmpp's reading of one XMPP-over-WebSocket
 * message, on stanzas shaped as prosody 0.12 and ejabberd 23.01 send them (namespace
 * prefixes as they use them), and on input that is not one well-formed element.
 */
#include "xmpp_stanza.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static xs_parser *p;

static void setup(void)
{
    p = xs_parser_new();
    cr_assert_not_null(p);
}

static void teardown(void)
{
    xs_parser_free(p);
}

static int parse(const char *s, xs_stanza *st)
{
    return xs_parse(p, s, strlen(s), st);
}

TestSuite(xmpp_stanza, .init = setup, .fini = teardown);

Test(xmpp_stanza, features_before_and_after_sasl)
{
    xs_stanza st;
    cr_assert_eq(parse("<stream:features xmlns:stream=\"http://etherx.jabber.org/streams\">"
                       "<mechanisms xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><mechanism>"
                       "SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism></mechanisms>"
                       "</stream:features>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_FEATURES);
    cr_assert(st.mech_plain);
    cr_assert(!st.bind);
    cr_assert_eq(parse("<stream:features xmlns:stream=\"http://etherx.jabber.org/streams\">"
                       "<mechanisms xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><mechanism>"
                       "SCRAM-SHA-1</mechanism><mechanism>PLAINX</mechanism></mechanisms>"
                       "</stream:features>",
                       &st),
                 0);
    cr_assert(!st.mech_plain, "PLAINX is not PLAIN");
    cr_assert_eq(parse("<stream:features xmlns:stream=\"http://etherx.jabber.org/streams\">"
                       "<bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/><session "
                       "xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"><optional/></session>"
                       "</stream:features>",
                       &st),
                 0);
    cr_assert(st.bind && st.session && st.session_optional);
    cr_assert_eq(parse("<features xmlns=\"http://etherx.jabber.org/streams\"><session "
                       "xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></features>",
                       &st),
                 0);
    cr_assert(st.session && !st.session_optional && !st.bind);
}

Test(xmpp_stanza, framing_and_sasl)
{
    xs_stanza st;
    cr_assert_eq(parse("<open xmlns=\"urn:ietf:params:xml:ns:xmpp-framing\" from=\"localhost\" "
                       "id=\"abc\" version=\"1.0\" xml:lang=\"en\"/>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_OPEN);
    cr_assert_str_eq(st.id, "abc");
    cr_assert_eq(parse("<success xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"/>", &st), 0);
    cr_assert_eq(st.kind, XS_SUCCESS);
    cr_assert_eq(parse("<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><not-authorized/>"
                       "</failure>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_FAILURE);
    cr_assert_eq(parse("<close xmlns=\"urn:ietf:params:xml:ns:xmpp-framing\"/>", &st), 0);
    cr_assert_eq(st.kind, XS_CLOSE);
    cr_assert_eq(parse("<stream:error xmlns:stream=\"http://etherx.jabber.org/streams\">"
                       "<policy-violation xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"
                       "</stream:error>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_STREAM_ERROR);
}

Test(xmpp_stanza, room_self_presence_codes)
{
    xs_stanza st;
    cr_assert_eq(parse("<presence xmlns=\"jabber:client\" from=\"room3@conference.localhost/u7\" "
                       "to=\"u7@localhost/r\"><x xmlns=\"http://jabber.org/protocol/muc#user\">"
                       "<item affiliation=\"owner\" role=\"moderator\"/><status code=\"201\"/>"
                       "<status code=\"110\"/></x></presence>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_PRESENCE);
    cr_assert_str_eq(st.from, "room3@conference.localhost/u7");
    cr_assert(st.status110 && st.status201);
    cr_assert_eq(parse("<presence from=\"room3@conference.localhost/u8\"><x "
                       "xmlns=\"http://jabber.org/protocol/muc#user\"><item affiliation=\"none\" "
                       "role=\"participant\"/></x><status code=\"110\"/></presence>",
                       &st),
                 0);
    cr_assert(!st.status110, "a status outside muc#user's x is not the room's code");
}

Test(xmpp_stanza, groupchat_body_head_and_length)
{
    xs_stanza st;
    char big[3000];
    strcpy(big, "<message xmlns=\"jabber:client\" type=\"groupchat\" id=\"5f-9\" "
                "from=\"room0@conference.localhost/u1\"><body>0123456789abcdef");
    size_t n = strlen(big);
    memset(big + n, 'q', 2000);
    strcpy(big + n + 2000, "</body><stanza-id xmlns=\"urn:xmpp:sid:0\" id=\"x\"/></message>");
    cr_assert_eq(parse(big, &st), 0);
    cr_assert_eq(st.kind, XS_MESSAGE);
    cr_assert_str_eq(st.type, "groupchat");
    cr_assert_str_eq(st.id, "5f-9");
    cr_assert(st.body);
    cr_assert_eq(st.body_n, 2016);
    cr_assert_str_eq(st.body_head, "0123456789abcdef");
    cr_assert(!st.mam_result);
}

Test(xmpp_stanza, mam_result_and_fin)
{
    xs_stanza st;
    cr_assert_eq(parse("<message xmlns=\"jabber:client\" to=\"u0@localhost/r\" "
                       "from=\"room1@conference.localhost\"><result xmlns=\"urn:xmpp:mam:2\" "
                       "queryid=\"p1-4\" id=\"1700000000000001\"><forwarded "
                       "xmlns=\"urn:xmpp:forward:0\"><delay xmlns=\"urn:xmpp:delay\" "
                       "stamp=\"2026-12-06T03:00:00Z\"/><message type=\"groupchat\" "
                       "from=\"room1@conference.localhost/u1\"><body>0000</body></message>"
                       "</forwarded></result></message>",
                       &st),
                 0);
    cr_assert(st.mam_result);
    cr_assert_str_eq(st.queryid, "p1-4");
    cr_assert(!st.body, "the archived message's body is not the carrier's");
    cr_assert_eq(parse("<iq xmlns=\"jabber:client\" type=\"result\" id=\"p1-4\"><fin "
                       "xmlns=\"urn:xmpp:mam:2\"><set xmlns=\"http://jabber.org/protocol/rsm\">"
                       "<first index=\"0\">a</first><last>B-17</last><count>250</count></set>"
                       "</fin></iq>",
                       &st),
                 0);
    cr_assert_eq(st.kind, XS_IQ);
    cr_assert(st.fin && !st.complete);
    cr_assert_str_eq(st.rsm_last, "B-17");
    cr_assert_eq(parse("<iq type=\"result\" id=\"p1-5\"><fin xmlns=\"urn:xmpp:mam:2\" "
                       "complete=\"true\"><set xmlns=\"http://jabber.org/protocol/rsm\"><count>"
                       "250</count></set></fin></iq>",
                       &st),
                 0);
    cr_assert(st.fin && st.complete);
    cr_assert_str_eq(st.rsm_last, "");
}

Test(xmpp_stanza, stanza_error_condition)
{
    xs_stanza st;
    cr_assert_eq(parse("<iq xmlns=\"jabber:client\" type=\"error\" id=\"aff0\" "
                       "from=\"room0@conference.localhost\"><query "
                       "xmlns=\"http://jabber.org/protocol/muc#admin\"/><error type=\"cancel\">"
                       "<text xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\">no</text>"
                       "<not-allowed xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\"/></error></iq>",
                       &st),
                 0);
    cr_assert(st.error);
    cr_assert_str_eq(st.error_cond, "not-allowed");
    cr_assert_str_eq(st.type, "error");
}

Test(xmpp_stanza, not_one_well_formed_element)
{
    xs_stanza st;
    const char *bad[] = {"",        "<iq type=\"result\">", "<a/><b/>", "not xml",
                         "<a></b>", "<a x=\"1\" x=\"2\"/>", "<p:a/>"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(parse(bad[i], &st), XS_E_SYNTAX, "%s", bad[i]);
    /* The parser is usable again after a bad message, and long attributes are cut. */
    char from[600];
    memset(from, 'f', sizeof(from));
    from[0] = '<';
    memcpy(from + 1, "iq from=\"", 9);
    strcpy(from + 500, "\"/>");
    cr_assert_eq(parse(from, &st), 0);
    cr_assert_eq(strlen(st.from), sizeof(st.from) - 1);
}
