/* flamegraph.c: the self-contained interactive HTML flame graph (see flamegraph.h).
 *
 * The stacks are merged here into one call tree: under each node, one child per distinct frame
 * name, with inclusive values (the node's own stacks plus all its callees'). The page gets the
 * tree as JSON in preorder (every node followed by its subtree, siblings sorted by name so the
 * layout does not move when the value shown changes), each node as its depth, a name index and
 * one value per kind; the node's position in that order is its id (the page's #zoom=ID).
 *
 * The page's script (flamegraph.js) rebuilds the tree from the depths, draws it as absolutely
 * positioned divs with the root ("all") at the top and callees below, and creates only the frames
 * at least half a pixel wide, so large profiles stay fast. Its state (zoom, search, value) lives in
 * the URL fragment and behind window.heapscopeFlame (zoomTo, search, setValue, state, details). The
 * script and the style sheet (flamegraph.css) are files of their own, compiled in at build time
 * (flamegraph_assets.h).
 *
 * Escaping: names and titles are arbitrary bytes. In HTML text they are entity-escaped; in the
 * JSON, '<', '>' and '&' are written as \u escapes, so "</script>" or "<!--" can never appear
 * inside the data's script element. Invalid UTF-8 becomes U+FFFD in both.
 */
#include "flamegraph.h"

#include "flamegraph_assets.h"
#include "hash.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "sort.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What the values mean, in the page's terms (its value= fragment and control names). */
static const char *const kind_name[HS_FG_VALUES] = {
    "inuse_bytes",
    "inuse_count",
    "alloc_bytes",
    "alloc_count",
};

/* ---- The merged call tree ---- */

/* The tree's two tables (hash_table.h) hold entry index + 1 (0: empty) and read keys
 * through the tree (their ctx). */
struct tree;
struct name_key {
    const char *s;
    uint32_t hash;
};
struct edge_key {
    uint32_t parent, name;
};
static uint64_t name_key_hash(const struct name_key *k, const void *ctx);
static uint64_t name_entry_hash(const uint32_t *slot, const void *ctx);
static bool name_matches(const uint32_t *slot, const struct name_key *k, const void *ctx);
static uint64_t edge_key_hash(const struct edge_key *k, const void *ctx);
static uint64_t edge_entry_hash(const uint32_t *slot, const void *ctx);
static bool edge_matches(const uint32_t *slot, const struct edge_key *k, const void *ctx);
static inline bool slot_is_empty(const uint32_t *slot)
{
    return *slot == 0;
}
static inline void slot_clear(uint32_t *slot)
{
    *slot = 0;
}
HS_HASH_TABLE_DEFINE(name_table, uint32_t, struct name_key, name_key_hash, name_entry_hash,
                     name_matches, slot_is_empty, slot_clear)
HS_HASH_TABLE_DEFINE(edge_table, uint32_t, struct edge_key, edge_key_hash, edge_entry_hash,
                     edge_matches, slot_is_empty, slot_clear)

struct tree {
    size_t nv; /* values per node: HS_FG_VALUES, twice that in a diff (the base's after) */
    /* Interned frame names, found through name_slots; name_hash is the hash of each name (to
     * rehash without rereading the strings). */
    const char **names;
    uint32_t *name_hash;
    size_t num_names, cap_names;
    struct name_table name_slots;
    /* Nodes (node 0 is the root); node_slots maps (parent, name) to the node. */
    uint32_t *parent, *name;
    int64_t *values; /* nv per node */
    size_t num_nodes, cap_nodes;
    struct edge_table node_slots;
};

/* hs_hash_string folded to 32 bits. */
static uint32_t hash_string(const char *s)
{
    uint64_t h = hs_hash_string(s);
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_edge(uint32_t parent, uint32_t name)
{
    uint64_t h = ((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

/* Grows *array (elements of size elem) to hold cap elements; false when out of memory. */
static bool grow(void *array, size_t cap, size_t elem)
{
    void *p = realloc(*(void **)array, cap * elem);
    if (!p)
        return false;
    *(void **)array = p;
    return true;
}

static uint64_t name_key_hash(const struct name_key *k, const void *ctx)
{
    (void)ctx;
    return k->hash;
}
static uint64_t name_entry_hash(const uint32_t *slot, const void *ctx)
{
    return ((const struct tree *)ctx)->name_hash[*slot - 1];
}
static bool name_matches(const uint32_t *slot, const struct name_key *k, const void *ctx)
{
    const struct tree *t = ctx;
    return t->name_hash[*slot - 1] == k->hash && strcmp(t->names[*slot - 1], k->s) == 0;
}
static uint64_t edge_key_hash(const struct edge_key *k, const void *ctx)
{
    (void)ctx;
    return hash_edge(k->parent, k->name);
}
static uint64_t edge_entry_hash(const uint32_t *slot, const void *ctx)
{
    const struct tree *t = ctx;
    return hash_edge(t->parent[*slot - 1], t->name[*slot - 1]);
}
static bool edge_matches(const uint32_t *slot, const struct edge_key *k, const void *ctx)
{
    const struct tree *t = ctx;
    return t->parent[*slot - 1] == k->parent && t->name[*slot - 1] == k->name;
}

/* Sets *out to the index of name s, adding it if new. False when out of memory. */
static bool intern(struct tree *t, const char *s, uint32_t *out)
{
    uint32_t h = hash_string(s);
    const uint32_t *slot = name_table_find(&t->name_slots, &(struct name_key){s, h});
    if (slot) {
        *out = *slot - 1;
        return true;
    }
    if (!name_table_reserve(&t->name_slots, 1))
        return false;
    if (t->num_names == t->cap_names) {
        size_t cap = t->cap_names ? 2 * t->cap_names : 256;
        if (!grow(&t->names, cap, sizeof(*t->names)) ||
            !grow(&t->name_hash, cap, sizeof(*t->name_hash)))
            return false;
        t->cap_names = cap;
    }
    size_t index = t->num_names++;
    t->names[index] = s;
    t->name_hash[index] = h;
    name_table_put(&t->name_slots, &(uint32_t){(uint32_t)index + 1});
    *out = (uint32_t)index;
    return true;
}

/* Appends a node with zero values; false when out of memory or out of 32-bit ids. */
static bool add_node(struct tree *t, uint32_t parent, uint32_t name)
{
    if (t->num_nodes >= UINT32_MAX - 1) {
        errno = EOVERFLOW;
        return false;
    }
    if (t->num_nodes == t->cap_nodes) {
        size_t cap = t->cap_nodes ? 2 * t->cap_nodes : 1024;
        if (!grow(&t->parent, cap, sizeof(*t->parent)) || !grow(&t->name, cap, sizeof(*t->name)) ||
            !grow(&t->values, cap * t->nv, sizeof(*t->values)))
            return false;
        t->cap_nodes = cap;
    }
    size_t index = t->num_nodes++;
    t->parent[index] = parent;
    t->name[index] = name;
    memset(&t->values[index * t->nv], 0, t->nv * sizeof(*t->values));
    return true;
}

/* Sets *out to parent's child named name, adding it if new. False when out of memory. */
static bool child(struct tree *t, uint32_t parent, uint32_t name, uint32_t *out)
{
    const uint32_t *slot = edge_table_find(&t->node_slots, &(struct edge_key){parent, name});
    if (slot) {
        *out = *slot - 1;
        return true;
    }
    if (!edge_table_reserve(&t->node_slots, 1) || !add_node(t, parent, name))
        return false;
    size_t index = t->num_nodes - 1;
    edge_table_put(&t->node_slots, &(uint32_t){(uint32_t)index + 1});
    *out = (uint32_t)index;
    return true;
}

/* a + b, saturating instead of overflowing. */
static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return sum;
}

static void add_values(struct tree *t, uint32_t node, const struct hs_fg_stack *s)
{
    int64_t *v = &t->values[(size_t)node * t->nv];
    for (size_t k = 0; k < HS_FG_VALUES; k++) {
        v[k] = add_sat(v[k], s->values[k]);
        if (t->nv > HS_FG_VALUES)
            v[HS_FG_VALUES + k] = add_sat(v[HS_FG_VALUES + k], s->base[k]);
    }
}

static void free_tree(struct tree *t)
{
    free(t->names);
    free(t->name_hash);
    name_table_destroy(&t->name_slots);
    free(t->parent);
    free(t->name);
    free(t->values);
    edge_table_destroy(&t->node_slots);
}

/* Merges the stacks into t: every node on a stack's path gets the stack's values. */
static bool build_tree(struct tree *t, const struct hs_fg_input *in)
{
    uint32_t all;
    t->nv = in->diff ? 2 * HS_FG_VALUES : HS_FG_VALUES;
    name_table_init(&t->name_slots, &hs_table_libc, t, 50);
    edge_table_init(&t->node_slots, &hs_table_libc, t, 50);
    if (!intern(t, "all", &all) || !add_node(t, UINT32_MAX, all))
        return false;
    for (size_t i = 0; i < in->num_stacks; i++) {
        const struct hs_fg_stack *s = &in->stacks[i];
        uint32_t node = 0;
        add_values(t, 0, s);
        for (size_t d = 0; d < s->depth; d++) {
            const char *frame = s->frames[d] ? s->frames[d] : "??";
            uint32_t name;
            if (!intern(t, frame, &name) || !child(t, node, name, &node))
                return false;
            add_values(t, node, s);
        }
    }
    return true;
}

/* ---- Preorder with siblings sorted by name ---- */

static int by_name(const void *a, const void *b, void *ctx)
{
    const char *const *names = ctx;
    return strcmp(names[*(const uint32_t *)a], names[*(const uint32_t *)b]);
}

struct sibling_order {
    const uint32_t *parent, *name, *rank;
};

/* By parent, then by the name's rank; total, as no two siblings share a name. */
static int by_parent_then_name(const void *a, const void *b, void *ctx)
{
    const struct sibling_order *o = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (o->parent[x] != o->parent[y])
        return o->parent[x] < o->parent[y] ? -1 : 1;
    uint32_t rx = o->rank[o->name[x]], ry = o->rank[o->name[y]];
    return rx < ry ? -1 : rx > ry;
}

/* Fills pre (num_nodes ids, root first) and depth (per node id). False when out of memory. */
static bool preorder(const struct tree *t, uint32_t *pre, uint32_t *depth)
{
    size_t n = t->num_nodes;
    size_t scratch = n > t->num_names ? n : t->num_names;
    uint32_t *rank = malloc(t->num_names * sizeof(*rank));
    uint32_t *sorted = malloc(scratch * sizeof(*sorted)); /* non-root nodes, by parent */
    uint32_t *first = calloc(n, sizeof(*first));          /* per node: its children in sorted */
    uint32_t *num_children = calloc(n, sizeof(*num_children)); /* per node */
    uint32_t *stack = malloc(n * sizeof(*stack));
    bool ok = rank && sorted && first && num_children && stack;
    if (ok) {
        /* Rank names alphabetically once, so that sorting nodes compares integers. */
        for (size_t i = 0; i < t->num_names; i++)
            sorted[i] = (uint32_t)i; /* sorted doubles as scratch */
        hs_sort(sorted, t->num_names, sizeof(*sorted), by_name, (void *)t->names);
        for (size_t i = 0; i < t->num_names; i++)
            rank[sorted[i]] = (uint32_t)i;
        for (size_t i = 1; i < n; i++)
            sorted[i - 1] = (uint32_t)i;
        struct sibling_order o = {t->parent, t->name, rank};
        hs_sort(sorted, n - 1, sizeof(*sorted), by_parent_then_name, &o);
        for (size_t i = n - 1; i-- > 0;) {
            first[t->parent[sorted[i]]] = (uint32_t)i;
            num_children[t->parent[sorted[i]]]++;
        }
        /* Depth first with an explicit stack (stacks may be deep): children pushed last
         * first, so they come out in name order. */
        size_t top = 0, out = 0;
        stack[top++] = 0;
        depth[0] = 0;
        while (top) {
            uint32_t node = stack[--top];
            pre[out++] = node;
            for (size_t k = num_children[node]; k-- > 0;) {
                uint32_t c = sorted[first[node] + k];
                depth[c] = depth[node] + 1;
                stack[top++] = c;
            }
        }
    }
    free(rank);
    free(sorted);
    free(first);
    free(num_children);
    free(stack);
    if (!ok)
        errno = ENOMEM;
    return ok;
}

/* ---- Output ---- */

/* The length of the valid UTF-8 sequence at s (1 to 4; s non-empty), or 0 if it is not valid
 * (bad lead byte, bad continuation, overlong, surrogate, above U+10FFFF); *cp gets the code
 * point. */
static size_t utf8_sequence(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        *cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        *cp = c & 0x0f;
        if (c == 0xe0)
            lo = 0xa0; /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        *cp = c & 0x07;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        unsigned char b = s[i]; /* the NUL terminator fails the test, so no overrun */
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf))
            return 0;
        *cp = (*cp << 6) | (b & 0x3f);
    }
    return len;
}

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

/* s as HTML text or attribute value: markup characters as entities, control characters and
 * invalid UTF-8 as U+FFFD. */
static void put_html(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        size_t len = utf8_sequence(p, &cp);
        if (len == 0 || (cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0x7f) {
            fputs(replacement, out);
            p += len ? len : 1;
            continue;
        }
        switch (cp) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            fwrite(p, 1, len, out);
        }
        p += len;
    }
}

/* s as a JSON string, safe inside a <script> element: no '<', '>' or '&' (so no "</script>",
 * "<!--"), no U+2028/U+2029 (line breaks to older JavaScript), invalid UTF-8 as U+FFFD. */
static void put_json_string(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    putc('"', out);
    while (*p) {
        uint32_t cp;
        size_t len = utf8_sequence(p, &cp);
        if (len == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        if (cp == '"' || cp == '\\') {
            putc('\\', out);
            putc((int)cp, out);
        } else if (cp < 0x20 || cp == 0x7f || cp == '<' || cp == '>' || cp == '&' || cp == 0x2028 ||
                   cp == 0x2029) {
            fprintf(out, "\\u%04x", (unsigned)cp);
        } else {
            fwrite(p, 1, len, out);
        }
        p += len;
    }
    putc('"', out);
}

static void put_u64(FILE *out, uint64_t v)
{
    char buf[24], *p = buf + sizeof(buf);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fwrite(p, 1, (size_t)(buf + sizeof(buf) - p), out);
}

static void put_i64(FILE *out, int64_t v)
{
    if (v < 0) {
        putc('-', out);
        put_u64(out, -(uint64_t)v);
    } else {
        put_u64(out, (uint64_t)v);
    }
}

/* Separator before item i of a JSON array; a line break now and then keeps lines short. */
static void put_separator(FILE *out, size_t i)
{
    if (i > 0) {
        putc(',', out);
        if (i % 64 == 0)
            putc('\n', out);
    }
}

/* One object of arrays, one per kind shown, of the node values at offset (0, or HS_FG_VALUES
 * for the base), in preorder. */
static void put_value_arrays(FILE *out, const struct tree *t, const uint32_t *pre, size_t offset,
                             bool has_alloc)
{
    size_t kinds = has_alloc ? HS_FG_VALUES : HS_FG_ALLOC_BYTES;
    putc('{', out);
    for (size_t k = 0; k < kinds; k++) {
        fprintf(out, "%s\"%s\":[", k ? ",\n" : "", kind_name[k]);
        for (size_t i = 0; i < t->num_nodes; i++) {
            put_separator(out, i);
            put_i64(out, t->values[(size_t)pre[i] * t->nv + offset + k]);
        }
        putc(']', out);
    }
    putc('}', out);
}

/* The kind the page opens on: in->value when the page has it, else in-use bytes. */
static size_t initial_kind(const struct hs_fg_input *in)
{
    if (in->value < 0 || in->value >= HS_FG_VALUES ||
        (!in->has_alloc && in->value >= HS_FG_ALLOC_BYTES))
        return HS_FG_INUSE_BYTES;
    return (size_t)in->value;
}

/* The data: {"format":1,"diff":B,"value":KIND,"names":[...],"name":[...],"depth":[...],
 * "values":{KIND:[...]},"base":{KIND:[...]}}, nodes in preorder; "value" the kind shown on
 * opening, "base" only in a diff, alloc kinds only with has_alloc. */
static void put_data(FILE *out, const struct tree *t, const uint32_t *pre, const uint32_t *depth,
                     const struct hs_fg_input *in)
{
    fprintf(out, "{\"format\":1,\"diff\":%s,\"value\":\"%s\",\n\"names\":[",
            in->diff ? "true" : "false", kind_name[initial_kind(in)]);
    for (size_t i = 0; i < t->num_names; i++) {
        if (i)
            fputs(",\n", out);
        put_json_string(out, t->names[i]);
    }
    fputs("],\n\"name\":[", out);
    for (size_t i = 0; i < t->num_nodes; i++) {
        put_separator(out, i);
        put_u64(out, t->name[pre[i]]);
    }
    fputs("],\n\"depth\":[", out);
    for (size_t i = 0; i < t->num_nodes; i++) {
        put_separator(out, i);
        put_u64(out, depth[pre[i]]);
    }
    fputs("],\n\"values\":", out);
    put_value_arrays(out, t, pre, 0, in->has_alloc);
    if (in->diff) {
        fputs(",\n\"base\":", out);
        put_value_arrays(out, t, pre, HS_FG_VALUES, in->has_alloc);
    }
    fputs("}\n", out);
}

/* The page's style sheet and script: flamegraph.css and flamegraph.js, embedded at build time
 * (flamegraph_assets.h). */

static void put_page(FILE *out, const struct tree *t, const uint32_t *pre, const uint32_t *depth,
                     const struct hs_fg_input *in)
{
    const char *title = in->title ? in->title : "heapscope";
    const char *subtitle = in->subtitle ? in->subtitle : "";

    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
    /* Nothing may load from anywhere: the page is meant to be mailed around and opened offline. */
    fputs("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n",
          out);
    fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", out);
    put_html(out, title);
    fputs(" - heapscope flame graph</title>\n<style>\n", out);
    fputs(hs_fg_page_css, out);
    fputs("</style>\n</head>\n<body>\n<header>\n<h1 id=\"hs-title\">", out);
    put_html(out, title);
    fputs("</h1>\n<div class=\"hs-sub\" id=\"hs-subtitle\">", out);
    put_html(out, subtitle);
    fputs("</div>\n<div id=\"hs-total\"></div>\n<div id=\"hs-legend\"></div>\n"
          "<noscript>The flame graph needs JavaScript.</noscript>\n</header>\n",
          out);

    /* The radio buttons start on the initial kind, as the script will set them. */
    size_t kind = initial_kind(in);
    bool count = kind == HS_FG_INUSE_COUNT || kind == HS_FG_ALLOC_COUNT;
    bool alloc = kind >= HS_FG_ALLOC_BYTES;
    fprintf(out,
            "<div id=\"hs-controls\">\n<span role=\"radiogroup\" aria-label=\"Unit\">"
            "<label><input type=\"radio\" name=\"hs-unit\" value=\"bytes\"%s> Bytes</label>"
            "<label><input type=\"radio\" name=\"hs-unit\" value=\"count\"%s> Count</label>"
            "</span>\n",
            count ? "" : " checked", count ? " checked" : "");
    if (in->has_alloc)
        fprintf(out,
                "<span role=\"radiogroup\" aria-label=\"Memory\" id=\"hs-kinds\">"
                "<label><input type=\"radio\" name=\"hs-kind\" value=\"inuse\"%s> In use</label>"
                "<label><input type=\"radio\" name=\"hs-kind\" value=\"alloc\"%s> "
                "Allocated</label></span>\n",
                alloc ? "" : " checked", alloc ? " checked" : "");
    fputs("<button type=\"button\" id=\"hs-reset\" disabled>Reset zoom</button>\n"
          "<input type=\"search\" id=\"hs-search\" placeholder=\"Search frames (/)\" "
          "aria-label=\"Search frames\" autocomplete=\"off\" spellcheck=\"false\">\n"
          "<span id=\"hs-match\" aria-live=\"polite\"></span>\n</div>\n"
          "<div id=\"hs-chart\"></div>\n<div id=\"hs-details\"></div>\n<div id=\"hs-tip\"></div>\n",
          out);

    fputs("<script type=\"application/json\" id=\"hs-data\">\n", out);
    put_data(out, t, pre, depth, in);
    fputs("</script>\n<script>\n", out);
    fputs(hs_fg_page_js, out);
    fputs("</script>\n</body>\n</html>\n", out);
}

int hs_flamegraph_write_html(FILE *out, const struct hs_fg_input *in)
{
    struct tree t = {0};
    uint32_t *pre = NULL, *depth = NULL;
    int rc = -1;

    errno = 0;
    if (!build_tree(&t, in)) {
        if (errno == 0)
            errno = ENOMEM;
        goto done;
    }
    pre = malloc(t.num_nodes * sizeof(*pre));
    depth = malloc(t.num_nodes * sizeof(*depth));
    if (!pre || !depth) {
        errno = ENOMEM;
        goto done;
    }
    if (!preorder(&t, pre, depth))
        goto done;
    errno = 0;
    put_page(out, &t, pre, depth, in);
    if (fflush(out) != 0 || ferror(out)) {
        if (errno == 0)
            errno = EIO;
        goto done;
    }
    rc = 0;
done:;
    int saved = errno;
    free(pre);
    free(depth);
    free_tree(&t);
    errno = saved;
    return rc;
}
