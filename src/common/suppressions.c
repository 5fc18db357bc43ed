/* suppressions.c: parser and matcher of suppression rules (see suppressions.h). */
#include "suppressions.h"

#include "format.h"

#include <string.h>

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

bool hs_supp_parse(const char *text, size_t len, struct hs_supp_set *set, hs_supp_alloc_fn alloc,
                   void *ctx, char *err, size_t err_cap)
{
    memset(set, 0, sizeof(*set));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    set->rules = alloc(lines * sizeof(struct hs_supp_rule), ctx);
    set->text = alloc(len + 1, ctx);
    if (!set->rules || !set->text) {
        hs_format(err, err_cap, "out of memory");
        return false;
    }
    size_t used = 0;
    unsigned number = 0;
    for (size_t start = 0; start < len || (start == len && number == 0 && len > 0);) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        number++;
        size_t b = start, e = end;
        while (b < e && is_space(text[b]))
            b++;
        while (e > b && is_space(text[e - 1]))
            e--;
        start = end + 1;
        if (b == e || text[b] == '#')
            continue;
        enum hs_supp_kind kind;
        size_t prefix;
        if (e - b >= 5 && memcmp(text + b, "leak:", 5) == 0) {
            kind = HS_SUPP_LEAK;
            prefix = 5;
        } else if (e - b >= 6 && memcmp(text + b, "error:", 6) == 0) {
            kind = HS_SUPP_ERROR;
            prefix = 6;
        } else {
            hs_format(err, err_cap,
                      "%u: not a rule: '%.*s' (expected leak:PATTERN or "
                      "error:PATTERN, or a # comment)",
                      number, (int)(e - b > 80 ? 80 : e - b), text + b);
            return false;
        }
        b += prefix;
        while (b < e && is_space(text[b]))
            b++;
        if (b == e) {
            hs_format(err, err_cap, "%u: the rule has no pattern", number);
            return false;
        }
        memcpy(set->text + used, text + b, e - b);
        set->text[used + (e - b)] = '\0';
        set->rules[set->count++] = (struct hs_supp_rule){kind, set->text + used, number, 0, 0};
        used += e - b + 1;
        if (!nl)
            break;
    }
    return true;
}

/* Whether p[0..plen) matches s[0..slen), "*" matching any run of characters; lead: as if
 * p began with "*" (the match may start anywhere); tail: as if it ended with "*" (anything
 * may follow). Iterative with one backtrack point, the last star (the classic wildcard
 * matcher): no recursion, no allocation. */
static bool glob(const char *p, size_t plen, const char *s, size_t slen, bool lead, bool tail)
{
    const long none = -2;
    size_t pi = 0, si = 0, mark = 0;
    long star = lead ? -1 : none; /* -1: the virtual star before p[0] */
    for (;;) {
        if (tail && pi == plen)
            return true;
        if (si == slen)
            break;
        if (pi < plen && p[pi] == '*') {
            star = (long)pi++;
            mark = si;
        } else if (pi < plen && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != none) {
            pi = (size_t)(star + 1);
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

bool hs_supp_pattern_matches(const char *pattern, const char *name)
{
    size_t plen = strlen(pattern);
    bool start = plen > 0 && pattern[0] == '^';
    if (start) {
        pattern++;
        plen--;
    }
    bool end = plen > 0 && pattern[plen - 1] == '$';
    if (end)
        plen--;
    return glob(pattern, plen, name, strlen(name), !start, !end);
}

struct hs_supp_rule *hs_supp_match(struct hs_supp_set *set, enum hs_supp_kind kind,
                                   const char *const *names, size_t n)
{
    if (!set)
        return NULL;
    for (size_t r = 0; r < set->count; r++) {
        struct hs_supp_rule *rule = &set->rules[r];
        if (rule->kind != kind)
            continue;
        for (size_t i = 0; i < n; i++)
            if (names[i] && names[i][0] && hs_supp_pattern_matches(rule->pattern, names[i]))
                return rule;
    }
    return NULL;
}

void hs_supp_count(struct hs_supp_rule *rule, uint64_t bytes)
{
    __atomic_add_fetch(&rule->hits, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&rule->bytes, bytes, __ATOMIC_RELAXED);
}

const char *hs_supp_kind_name(enum hs_supp_kind kind)
{
    return kind == HS_SUPP_LEAK ? "leak" : "error";
}
