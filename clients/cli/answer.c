/* clients/cli/answer.c - reading the gateway's answers: JSON documents with
 * jansson, S3 <Error> documents with libxml2, and the messages a user sees
 * when a request fails. Everything taken from an answer is printed through
 * cli_term_copy, so a hostile answer cannot drive the terminal. */
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "cli_int.h"

void cli_term_copy(const char *s, char *out, size_t n)
{
    size_t o = 0;
    if (n == 0)
        return;
    for (; s && *s && o + 1 < n; s++) {
        unsigned char c = (unsigned char)*s;
        out[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    /* cut before a UTF-8 sequence that did not fit whole */
    if (s && *s && ((unsigned char)*s & 0xc0) == 0x80) {
        while (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0x80)
            o--;
        if (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0xc0)
            o--;
    }
    out[o] = '\0';
}

json_t *cli_answer_json(const struct cli_answer *a)
{
    if (a->status < 200 || a->status > 299 || !a->body.p)
        return NULL;
    json_error_t err;
    /* whole input, one object or array: trailing bytes make it malformed */
    return json_loadb(a->body.p, a->body.len, 0, &err);
}

/* The text of root's first child element named `name`, for a terminal. */
static bool child_text(xmlNode *root, const char *name, char *out, size_t n)
{
    for (xmlNode *k = root->children; k; k = k->next) {
        if (k->type != XML_ELEMENT_NODE || strcmp((const char *)k->name, name) != 0)
            continue;
        xmlChar *t = xmlNodeGetContent(k);
        cli_term_copy((const char *)t, out, n);
        xmlFree(t);
        return true;
    }
    return false;
}

bool cli_s3_error_parse(const char *body, size_t len, char *code, size_t code_n, char *msg,
                        size_t msg_n)
{
    if (!body || len == 0 || len > (size_t)INT32_MAX)
        return false;
    /* no network, no entity expansion beyond the five predefined ones, and
     * quiet: a proxy's HTML page is "not S3 XML", not a page of warnings */
    xmlDoc *doc = xmlReadMemory(body, (int)len, NULL, NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return false;
    bool ok = false;
    xmlNode *root = xmlDocGetRootElement(doc);
    if (root && strcmp((const char *)root->name, "Error") == 0 &&
        child_text(root, "Code", code, code_n)) {
        if (!child_text(root, "Message", msg, msg_n))
            msg[0] = '\0';
        ok = true;
    }
    xmlFreeDoc(doc);
    return ok;
}

int cli_report_failure(const char *cmd, const struct cli_answer *a, int transport_rc)
{
    if (transport_rc != 0) {
        fprintf(stderr, "shardgate %s: %s\n", cmd, a->err);
        return CLI_EXIT_GATEWAY;
    }
    char code[128], msg[1024];
    if (cli_s3_error_parse(a->body.p, a->body.len, code, sizeof code, msg, sizeof msg)) {
        fprintf(stderr, "shardgate %s: the gateway answered %ld %s: %s\n", cmd, a->status,
                code, msg);
    } else {
        /* not S3 XML (a proxy, an old gateway): show the start of it */
        char snip[201];
        size_t k = 0;
        for (const char *p = a->body.p ? a->body.p : ""; *p && k < sizeof snip - 1; p++)
            snip[k++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
        snip[k] = '\0';
        fprintf(stderr, "shardgate %s: the gateway answered HTTP %ld%s%s\n", cmd, a->status,
                snip[0] ? ": " : "", snip);
    }
    return CLI_EXIT_GATEWAY;
}

int cli_report_malformed(const char *cmd, const struct cli_answer *a)
{
    const char *b = a->body.p ? a->body.p : "";
    b += strspn(b, " \t\r\n");
    fprintf(stderr, "shardgate %s: malformed answer from the gateway (HTTP %ld)%s\n", cmd,
            a->status, *b == '<' ? ": XML, not JSON (a shardgate without prefetch hints?)"
                                 : "");
    return CLI_EXIT_GATEWAY;
}
