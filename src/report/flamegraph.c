/* flamegraph.c: the self-contained interactive HTML flame graph (see flamegraph.h).
 *
 * The stacks are merged here into one call tree: under each node, one child per distinct frame
 * name, with inclusive values (the node's own stacks plus all its callees'). The page gets the
 * tree as JSON in preorder (every node followed by its subtree, siblings sorted by name so the
 * layout does not move when the value shown changes), each node as its depth, a name index and
 * one value per kind; the node's position in that order is its id (the page's #zoom=ID).
 *
 * The page's script rebuilds the tree from the depths, draws it as absolutely positioned divs
 * with the root ("all") at the top and callees below, and creates only the frames at least half
 * a pixel wide, so large profiles stay fast. Its state (zoom, search, value) lives in the URL
 * fragment and behind window.heapscopeFlame (zoomTo, search, setValue, state, details).
 *
 * Escaping: names and titles are arbitrary bytes. In HTML text they are entity-escaped; in the
 * JSON, '<', '>' and '&' are written as \u escapes, so "</script>" or "<!--" can never appear
 * inside the data's script element. Invalid UTF-8 becomes U+FFFD in both.
 */
#include "flamegraph.h"
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

struct tree {
    size_t nv; /* values per node: HS_FG_VALUES, twice that in a diff (the base's after) */
    /* Interned frame names; name_slots is an open-addressed table of name index + 1 (0: empty),
     * name_hash the full hash of each name (to rehash without rereading the strings). */
    const char **names;
    uint32_t *name_hash;
    size_t num_names, cap_names;
    uint32_t *name_slots;
    size_t name_mask;
    /* Nodes (node 0 is the root); node_slots maps (parent, name) to node index + 1. */
    uint32_t *parent, *name;
    int64_t *values; /* nv per node */
    size_t num_nodes, cap_nodes;
    uint32_t *node_slots;
    size_t node_mask;
};

static uint32_t hash_string(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, folded to 32 bits */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
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

/* A zeroed table of 2^k slots, at least twice n; false when out of memory. */
static bool new_slots(uint32_t **slots, size_t *mask, size_t n)
{
    size_t size = 64;
    while (size < 2 * n)
        size *= 2;
    uint32_t *s = calloc(size, sizeof(*s));
    if (!s)
        return false;
    free(*slots);
    *slots = s;
    *mask = size - 1;
    return true;
}

/* Puts entry index (hash h) into the first free slot of its probe sequence. */
static void place(uint32_t *slots, size_t mask, uint32_t h, size_t index)
{
    size_t at = h & mask;
    while (slots[at])
        at = (at + 1) & mask;
    slots[at] = (uint32_t)index + 1;
}

/* Sets *out to the index of name s, adding it if new. False when out of memory. */
static bool intern(struct tree *t, const char *s, uint32_t *out)
{
    uint32_t h = hash_string(s);
    for (size_t at = h & t->name_mask;; at = (at + 1) & t->name_mask) {
        uint32_t slot = t->name_slots[at];
        if (!slot)
            break;
        if (t->name_hash[slot - 1] == h && strcmp(t->names[slot - 1], s) == 0) {
            *out = slot - 1;
            return true;
        }
    }
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
    if (2 * t->num_names > t->name_mask + 1) {
        if (!new_slots(&t->name_slots, &t->name_mask, t->num_names))
            return false;
        for (size_t i = 0; i < t->num_names; i++)
            place(t->name_slots, t->name_mask, t->name_hash[i], i);
    } else {
        place(t->name_slots, t->name_mask, h, index);
    }
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
    uint32_t h = hash_edge(parent, name);
    for (size_t at = h & t->node_mask;; at = (at + 1) & t->node_mask) {
        uint32_t slot = t->node_slots[at];
        if (!slot)
            break;
        if (t->parent[slot - 1] == parent && t->name[slot - 1] == name) {
            *out = slot - 1;
            return true;
        }
    }
    if (!add_node(t, parent, name))
        return false;
    size_t index = t->num_nodes - 1;
    if (2 * t->num_nodes > t->node_mask + 1) {
        if (!new_slots(&t->node_slots, &t->node_mask, t->num_nodes))
            return false;
        for (size_t i = 1; i < t->num_nodes; i++)
            place(t->node_slots, t->node_mask, hash_edge(t->parent[i], t->name[i]), i);
    } else {
        place(t->node_slots, t->node_mask, h, index);
    }
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
    free(t->name_slots);
    free(t->parent);
    free(t->name);
    free(t->values);
    free(t->node_slots);
}

/* Merges the stacks into t: every node on a stack's path gets the stack's values. */
static bool build_tree(struct tree *t, const struct hs_fg_input *in)
{
    uint32_t all;
    t->nv = in->diff ? 2 * HS_FG_VALUES : HS_FG_VALUES;
    if (!new_slots(&t->name_slots, &t->name_mask, 0) ||
        !new_slots(&t->node_slots, &t->node_mask, 0) || !intern(t, "all", &all) ||
        !add_node(t, UINT32_MAX, all))
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

/* The page's style sheet. */
static const char page_css[] =
    "body { margin: 0; font: 13px/1.45 system-ui, sans-serif; color: #1d1d1f;\n"
    "  background: #fbfbf8; }\n"
    "header { padding: 10px 16px 2px; }\n"
    "h1 { font-size: 18px; margin: 0 0 2px; overflow-wrap: anywhere; }\n"
    ".hs-sub, #hs-legend { color: #555; overflow-wrap: anywhere; }\n"
    ".hs-sub { white-space: pre-line; }\n"
    "#hs-total { font-weight: 600; }\n"
    "#hs-controls { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center;\n"
    "  padding: 6px 16px; border-bottom: 1px solid #ddd; }\n"
    "#hs-controls label { margin-right: 8px; white-space: nowrap; }\n"
    "#hs-search { width: 22em; }\n"
    "#hs-match { color: #7a1fa2; font-weight: 600; }\n"
    "#hs-chart { position: relative; margin: 8px 16px 12px; min-height: 18px; }\n"
    ".hs-f { position: absolute; height: 18px; box-sizing: border-box; padding: 0 3px;\n"
    "  border-right: 1px solid #fbfbf8; border-bottom: 1px solid #fbfbf8;\n"
    "  font: 12px/17px ui-monospace, Menlo, Consolas, monospace; color: #1d1d1f;\n"
    "  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer; }\n"
    ".hs-f:hover { outline: 1px solid #1d1d1f; z-index: 1; }\n"
    ".hs-anc { opacity: 0.45; }\n"
    ".hs-dark, .hs-match { color: #fff; }\n"
    ".hs-narrow { color: transparent; }\n"
    "#hs-details { position: sticky; bottom: 0; min-height: 3.2em; padding: 4px 16px;\n"
    "  background: #fff; border-top: 1px solid #ddd; overflow-wrap: anywhere; }\n"
    "#hs-tip { position: fixed; display: none; pointer-events: none; z-index: 10;\n"
    "  max-width: 640px; padding: 6px 8px; background: #fff; border: 1px solid #999;\n"
    "  border-radius: 3px;\n"
    "  box-shadow: 0 2px 8px rgba(0, 0, 0, 0.2); overflow-wrap: anywhere; }\n"
    ".hs-name { font-family: ui-monospace, Menlo, Consolas, monospace; font-weight: 600; }\n";

/* The page's script. Plain ES5-style JavaScript without dependencies; it uses no double quotes
 * and no backslashes, so that it reads the same here as in the page. */
static const char page_js[] =
    "// heapscope flame graph: draws the call tree that heapscope wrote into #hs-data.\n"
    "// Layout: the root ('all') at the top, callees below it; a frame's width is its share\n"
    "// of the chosen value (its own plus its callees') relative to the zoomed frame.\n"
    "(function () {\n"
    "  'use strict';\n"
    "\n"
    "  var KIND_LABELS = {\n"
    "    inuse_bytes: 'in-use bytes',\n"
    "    inuse_count: 'in-use objects',\n"
    "    alloc_bytes: 'allocated bytes',\n"
    "    alloc_count: 'allocated objects'\n"
    "  };\n"
    "  var ROW_PX = 18; // height of a row of frames, as in the style sheet\n"
    "  var MIN_PX = 0.5; // narrower frames are not drawn, nor their callees\n"
    "  var TEXT_PX = 20; // narrower frames keep their name in the DOM but do not paint it\n"
    "  var MATCH_COLOR = 'rgb(176,56,214)';\n"
    "\n"
    "  // The tree comes in preorder (each node followed by its subtree) with each node's depth,\n"
    "  // name index and inclusive values per kind: compact, and enough to rebuild the structure.\n"
    "  var data = JSON.parse(byId('hs-data').textContent);\n"
    "  var n = data.depth.length;\n"
    "  var parent = new Int32Array(n);\n"
    "  // end[i]: one past the last node of i's subtree; i's children are i + 1, end[i + 1], ...\n"
    "  var end = new Int32Array(n);\n"
    "  var namesLower = data.names.map(function (s) { return s.toLowerCase(); });\n"
    "  var nameColors = [];\n"
    "\n"
    "  // The value the page opens on (heapscope report --value); the URL's value= overrides.\n"
    "  var initialValue = hasKind(data.value) ? data.value : 'inuse_bytes';\n"
    "  var state = { zoom: 0, search: '', value: initialValue };\n"
    "  var matches = null; // per name index: does the name match the search (null: no search)\n"
    "  var hovered = -1;\n"
    "  var renderPending = false;\n"
    "  var chart = byId('hs-chart');\n"
    "  var tip = byId('hs-tip');\n"
    "\n"
    "  function byId(id) {\n"
    "    return document.getElementById(id);\n"
    "  }\n"
    "\n"
    "  // Rebuilds parents and subtree ends from the depths; open ancestors wait on a stack.\n"
    "  function buildTree() {\n"
    "    var open = [];\n"
    "    for (var i = 0; i < n; i++) {\n"
    "      var d = data.depth[i];\n"
    "      while (open.length > d) end[open.pop()] = i;\n"
    "      parent[i] = d > 0 ? open[d - 1] : -1;\n"
    "      open.push(i);\n"
    "    }\n"
    "    while (open.length) end[open.pop()] = n;\n"
    "  }\n"
    "\n"
    "  function hasKind(kind) {\n"
    "    return Object.prototype.hasOwnProperty.call(data.values, kind);\n"
    "  }\n"
    "\n"
    "  // Negative values (possible in hand-made input) draw as nothing rather than break layout.\n"
    "  function value(kind, i) {\n"
    "    var x = data.values[kind][i];\n"
    "    return x > 0 ? x : 0;\n"
    "  }\n"
    "\n"
    "  function baseValue(kind, i) {\n"
    "    var x = data.base[kind][i];\n"
    "    return x > 0 ? x : 0;\n"
    "  }\n"
    "\n"
    "  function frameName(i) {\n"
    "    return data.names[data.name[i]];\n"
    "  }\n"
    "\n"
    "  // ---- Formatting ----\n"
    "\n"
    "  function grouped(x) {\n"
    "    return x.toLocaleString('en-US');\n"
    "  }\n"
    "\n"
    "  function humanBytes(x) {\n"
    "    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];\n"
    "    var u = 0;\n"
    "    while (x >= 1024 && u < units.length - 1) {\n"
    "      x /= 1024;\n"
    "      u++;\n"
    "    }\n"
    "    return (u ? x.toFixed(1) : String(x)) + ' ' + units[u];\n"
    "  }\n"
    "\n"
    "  function isBytes(kind) {\n"
    "    return kind.slice(-6) === '_bytes';\n"
    "  }\n"
    "\n"
    "  // Short form, for totals: '4.0 KiB', '1,234'.\n"
    "  function formatValue(kind, x) {\n"
    "    return isBytes(kind) ? humanBytes(x) : grouped(x);\n"
    "  }\n"
    "\n"
    "  // Long form, for details: '4.0 KiB (4,096 B)'.\n"
    "  function formatExact(kind, x) {\n"
    "    if (!isBytes(kind) || x < 1024) return formatValue(kind, x);\n"
    "    return humanBytes(x) + ' (' + grouped(x) + ' B)';\n"
    "  }\n"
    "\n"
    "  function formatDelta(kind, d) {\n"
    "    return (d < 0 ? '-' : '+') + formatValue(kind, Math.abs(d));\n"
    "  }\n"
    "\n"
    "  function percent(part, whole) {\n"
    "    return (whole > 0 ? (100 * part) / whole : 0).toFixed(2) + '%';\n"
    "  }\n"
    "\n"
    "  // ---- Colours ----\n"
    "\n"
    "  // A warm colour derived from the name, so that a function keeps its colour everywhere;\n"
    "  // colours only tell neighbours apart.\n"
    "  function nameColor(k) {\n"
    "    if (nameColors[k] === undefined) {\n"
    "      var s = data.names[k];\n"
    "      var h = 2166136261;\n"
    "      for (var j = 0; j < s.length; j++) h = Math.imul(h ^ s.charCodeAt(j), 16777619);\n"
    "      h >>>= 0;\n"
    "      nameColors[k] = 'hsl(' + (h % 48) + ',' + (72 + ((h >>> 8) % 22)) + '%,' +\n"
    "        (58 + ((h >>> 16) % 12)) + '%)';\n"
    "    }\n"
    "    return nameColors[k];\n"
    "  }\n"
    "\n"
    "  // Diff colouring: red when the frame grew since the base, blue when it shrank, grey\n"
    "  // when unchanged. The strength follows the change relative to the larger of the two\n"
    "  // values, so it stays within 0..1: 0 -> x is full red, x -> 0 full blue, x -> 2x half.\n"
    "  function diffColor(div, i) {\n"
    "    var after = value(state.value, i);\n"
    "    var before = baseValue(state.value, i);\n"
    "    var delta = after - before;\n"
    "    if (delta === 0) {\n"
    "      div.classList.add('hs-same');\n"
    "      return 'rgb(226,226,226)';\n"
    "    }\n"
    "    var k = 0.25 + (0.75 * Math.abs(delta)) / Math.max(after, before);\n"
    "    var to = delta > 0 ? [214, 38, 38] : [38, 92, 214];\n"
    "    div.classList.add(delta > 0 ? 'hs-grew' : 'hs-shrank');\n"
    "    if (k > 0.6) div.classList.add('hs-dark');\n"
    "    var mixed = to.map(function (c) { return Math.round(240 + (c - 240) * k); });\n"
    "    return 'rgb(' + mixed.join(',') + ')';\n"
    "  }\n"
    "\n"
    "  function paint(div, i) {\n"
    "    var color;\n"
    "    if (matches && i > 0 && matches[data.name[i]]) {\n"
    "      div.classList.add('hs-match');\n"
    "      color = MATCH_COLOR;\n"
    "    } else if (data.diff) {\n"
    "      color = diffColor(div, i);\n"
    "    } else {\n"
    "      color = nameColor(data.name[i]);\n"
    "    }\n"
    "    div.style.backgroundColor = color;\n"
    "  }\n"
    "\n"
    "  // ---- Drawing ----\n"
    "\n"
    "  function pct(fraction) {\n"
    "    return (100 * fraction).toFixed(4) + '%';\n"
    "  }\n"
    "\n"
    "  function frameDiv(i, left, width, row, cls, narrow) {\n"
    "    var div = document.createElement('div');\n"
    "    div.className = 'hs-f' + (cls ? ' ' + cls : '') + (narrow ? ' hs-narrow' : '');\n"
    "    div.setAttribute('data-id', i);\n"
    "    div.style.left = pct(left);\n"
    "    div.style.width = pct(width);\n"
    "    div.style.top = row * ROW_PX + 'px';\n"
    "    div.textContent = frameName(i);\n"
    "    paint(div, i);\n"
    "    return div;\n"
    "  }\n"
    "\n"
    "  // Root first, ending with i.\n"
    "  function ancestry(i) {\n"
    "    var path = [];\n"
    "    for (; i >= 0; i = parent[i]) path.unshift(i);\n"
    "    return path;\n"
    "  }\n"
    "\n"
    "  // Adds the frames of top's subtree at least MIN_PX wide, top itself full width on row0;\n"
    "  // returns the number of rows used. An explicit stack, not recursion: stacks can be deep.\n"
    "  function drawSubtree(frag, kind, top, row0, widthPx) {\n"
    "    var v = data.values[kind];\n"
    "    var scale = v[top] > 0 ? 1 / v[top] : 0;\n"
    "    var rows = row0 + 1;\n"
    "    var todo = [top, 0, row0]; // triples: node, left edge (fraction), row\n"
    "    frag.appendChild(frameDiv(top, 0, 1, row0, ''));\n"
    "    while (todo.length) {\n"
    "      var row = todo.pop() + 1;\n"
    "      var x = todo.pop();\n"
    "      var i = todo.pop();\n"
    "      for (var c = i + 1; c < end[i]; c = end[c]) {\n"
    "        var w = (v[c] > 0 ? v[c] : 0) * scale;\n"
    "        if (w * widthPx >= MIN_PX) {\n"
    "          frag.appendChild(frameDiv(c, x, w, row, '', w * widthPx < TEXT_PX));\n"
    "          rows = Math.max(rows, row + 1);\n"
    "          if (end[c] > c + 1) todo.push(c, x, row);\n"
    "        }\n"
    "        x += w; // skipped frames keep their place: the gap shows memory too thin to draw\n"
    "      }\n"
    "    }\n"
    "    return rows;\n"
    "  }\n"
    "\n"
    "  // Redraws the chart from the state: the zoomed frame's ancestors full width and dimmed,\n"
    "  // the zoomed frame full width, its callees scaled to it. Only visible frames become\n"
    "  // elements, so this stays fast for large profiles.\n"
    "  function render() {\n"
    "    var started = performance.now();\n"
    "    var widthPx = chart.clientWidth || 1000;\n"
    "    var frag = document.createDocumentFragment();\n"
    "    var path = ancestry(state.zoom);\n"
    "    for (var r = 0; r < path.length - 1; r++) {\n"
    "      frag.appendChild(frameDiv(path[r], 0, 1, r, 'hs-anc'));\n"
    "    }\n"
    "    var rows = drawSubtree(frag, state.value, state.zoom, path.length - 1, widthPx);\n"
    "    chart.textContent = '';\n"
    "    chart.style.height = rows * ROW_PX + 'px';\n"
    "    chart.appendChild(frag);\n"
    "    updateText();\n"
    "    chart.setAttribute('data-frames', chart.childElementCount);\n"
    "    chart.setAttribute('data-render-ms', (performance.now() - started).toFixed(1));\n"
    "    // Since navigation start: reading, parsing and the first drawing, for tests.\n"
    "    if (!chart.hasAttribute('data-ready-ms')) {\n"
    "      chart.setAttribute('data-ready-ms', performance.now().toFixed(1));\n"
    "    }\n"
    "  }\n"
    "\n"
    "  function scheduleRender() {\n"
    "    if (renderPending) return;\n"
    "    renderPending = true;\n"
    "    requestAnimationFrame(function () {\n"
    "      renderPending = false;\n"
    "      render();\n"
    "    });\n"
    "  }\n"
    "\n"
    "  // ---- Text: totals, legend, search result, details ----\n"
    "\n"
    "  function setLines(el, lines) {\n"
    "    el.textContent = '';\n"
    "    lines.forEach(function (line, k) {\n"
    "      var div = document.createElement('div');\n"
    "      if (k === 0) div.className = 'hs-name';\n"
    "      div.textContent = line;\n"
    "      el.appendChild(div);\n"
    "    });\n"
    "  }\n"
    "\n"
    "  // The lines describing frame i: name, value, the other unit, shares, and the diff.\n"
    "  function details(i) {\n"
    "    var kind = state.value;\n"
    "    var group = kind.slice(0, kind.indexOf('_'));\n"
    "    var other = isBytes(kind) ? group + '_count' : group + '_bytes';\n"
    "    var v = value(kind, i);\n"
    "    var share = percent(v, value(kind, 0)) + ' of total';\n"
    "    if (state.zoom !== 0) {\n"
    "      share += ', ' + percent(v, value(kind, state.zoom)) + ' of the zoomed frame';\n"
    "    }\n"
    "    var lines = [\n"
    "      frameName(i),\n"
    "      KIND_LABELS[kind] + ': ' + formatExact(kind, v) + '; ' + KIND_LABELS[other] + ': ' +\n"
    "        formatExact(other, value(other, i)),\n"
    "      share\n"
    "    ];\n"
    "    if (data.diff) {\n"
    "      var before = baseValue(kind, i);\n"
    "      var change = before > 0 ? ' (' + (v >= before ? '+' : '') +\n"
    "        ((100 * (v - before)) / before).toFixed(1) + '%)' : v > 0 ? ' (new)' : '';\n"
    "      lines.push('before: ' + formatExact(kind, before) + ', after: ' +\n"
    "        formatExact(kind, v) + ', delta: ' + formatDelta(kind, v - before) + change);\n"
    "    }\n"
    "    return lines;\n"
    "  }\n"
    "\n"
    "  // A matching frame counts once with its callees: a match below a match is included.\n"
    "  function matched(kind) {\n"
    "    var frames = 0;\n"
    "    var sum = 0;\n"
    "    for (var i = 1; i < n; i++) if (matches[data.name[i]]) frames++;\n"
    "    for (var j = 1; j < n;) {\n"
    "      if (matches[data.name[j]]) {\n"
    "        sum += value(kind, j);\n"
    "        j = end[j];\n"
    "      } else {\n"
    "        j++;\n"
    "      }\n"
    "    }\n"
    "    var total = value(kind, 0);\n"
    "    return { frames: frames, value: sum, share: total > 0 ? sum / total : 0 };\n"
    "  }\n"
    "\n"
    "  function legend(kind) {\n"
    "    var text = 'Width: ' + KIND_LABELS[kind] + ' of a function and its callees; ' +\n"
    "      'root at the top, callees below. Click to zoom, Esc to reset. ';\n"
    "    if (data.diff) {\n"
    "      text += 'Red: grew since the base, blue: shrank; the stronger, the larger the ' +\n"
    "        'relative change. ';\n"
    "    } else {\n"
    "      text += 'Colours only tell functions apart. ';\n"
    "    }\n"
    "    return text + 'Search matches are purple. Frames under half a pixel are not drawn.';\n"
    "  }\n"
    "\n"
    "  function updateText() {\n"
    "    var kind = state.value;\n"
    "    var total = value(kind, 0);\n"
    "    var group = kind.slice(0, kind.indexOf('_'));\n"
    "    var other = isBytes(kind) ? group + '_count' : group + '_bytes';\n"
    "    var line = 'Total: ' + formatValue(kind, total) + ' ' + KIND_LABELS[kind];\n"
    "    if (data.diff) {\n"
    "      var before = baseValue(kind, 0);\n"
    "      line += ' (base ' + formatValue(kind, before) + ', ' +\n"
    "        formatDelta(kind, total - before) + ')';\n"
    "    }\n"
    "    byId('hs-total').textContent = line + '; ' + formatValue(other, value(other, 0)) + ' ' +\n"
    "      KIND_LABELS[other];\n"
    "    byId('hs-legend').textContent = legend(kind);\n"
    "    byId('hs-reset').disabled = state.zoom === 0;\n"
    "    var summary = '';\n"
    "    if (matches) {\n"
    "      var m = matched(kind);\n"
    "      var frames = grouped(m.frames) + (m.frames === 1 ? ' frame' : ' frames');\n"
    "      summary = 'Matched ' + frames + ': ' + formatValue(kind, m.value) + ', ' +\n"
    "        percent(m.value, total) + ' of total';\n"
    "    }\n"
    "    byId('hs-match').textContent = summary;\n"
    "    syncControls();\n"
    "    setLines(byId('hs-details'), details(hovered >= 0 ? hovered : state.zoom));\n"
    "  }\n"
    "\n"
    "  // ---- State changes ----\n"
    "\n"
    "  function setSearch(text) {\n"
    "    state.search = text;\n"
    "    if (!text) {\n"
    "      matches = null;\n"
    "      return;\n"
    "    }\n"
    "    var needle = text.toLowerCase(); // case-insensitive substring: what a search box does\n"
    "    matches = namesLower.map(function (s) { return s.indexOf(needle) >= 0; });\n"
    "  }\n"
    "\n"
    "  // A frame from a node id (a number or a string of digits) or from a list of names, the\n"
    "  // root's child first; -1 if there is none. Nothing (null, '') is the root.\n"
    "  function resolve(path) {\n"
    "    if (path === undefined || path === null || path === '') return 0;\n"
    "    if (Array.isArray(path)) return resolveNames(path);\n"
    "    var s = String(path);\n"
    "    if (!/^[0-9]+$/.test(s)) return -1;\n"
    "    var id = Number(s);\n"
    "    return id < n ? id : -1;\n"
    "  }\n"
    "\n"
    "  function resolveNames(names) {\n"
    "    var i = 0;\n"
    "    for (var k = 0; k < names.length; k++) {\n"
    "      var c = i + 1;\n"
    "      while (c < end[i] && frameName(c) !== names[k]) c = end[c];\n"
    "      if (c >= end[i]) return -1;\n"
    "      i = c;\n"
    "    }\n"
    "    return i;\n"
    "  }\n"
    "\n"
    "  function update() {\n"
    "    render();\n"
    "    writeHash();\n"
    "  }\n"
    "\n"
    "  function zoomTo(path) {\n"
    "    var id = resolve(path);\n"
    "    if (id < 0) return false;\n"
    "    state.zoom = id;\n"
    "    update();\n"
    "    return true;\n"
    "  }\n"
    "\n"
    "  function search(text) {\n"
    "    setSearch(text === undefined || text === null ? '' : String(text));\n"
    "    update();\n"
    "    return matches ? matched(state.value) : null;\n"
    "  }\n"
    "\n"
    "  function setValue(kind) {\n"
    "    if (!hasKind(kind)) return false;\n"
    "    state.value = kind;\n"
    "    update();\n"
    "    return true;\n"
    "  }\n"
    "\n"
    "  function snapshot() {\n"
    "    return {\n"
    "      zoom: state.zoom,\n"
    "      zoomPath: ancestry(state.zoom).slice(1).map(frameName),\n"
    "      search: state.search,\n"
    "      value: state.value,\n"
    "      values: Object.keys(data.values),\n"
    "      total: value(state.value, 0),\n"
    "      matched: matches ? matched(state.value) : null,\n"
    "      diff: !!data.diff\n"
    "    };\n"
    "  }\n"
    "\n"
    "  // ---- URL fragment: #zoom=ID&search=TEXT&value=KIND, so a view can be shared ----\n"
    "\n"
    "  function decode(s) {\n"
    "    try {\n"
    "      return decodeURIComponent(s);\n"
    "    } catch (e) {\n"
    "      return s; // a malformed escape: take the text as it is\n"
    "    }\n"
    "  }\n"
    "\n"
    "  function readHash() {\n"
    "    var params = Object.create(null);\n"
    "    location.hash.slice(1).split('&').forEach(function (part) {\n"
    "      var eq = part.indexOf('=');\n"
    "      if (eq > 0) params[decode(part.slice(0, eq))] = decode(part.slice(eq + 1));\n"
    "    });\n"
    "    state.value = hasKind(params.value) ? params.value : initialValue;\n"
    "    var zoom = resolve(params.zoom);\n"
    "    state.zoom = zoom >= 0 ? zoom : 0;\n"
    "    setSearch(params.search || '');\n"
    "  }\n"
    "\n"
    "  function writeHash() {\n"
    "    var parts = [];\n"
    "    if (state.zoom) parts.push('zoom=' + state.zoom);\n"
    "    if (state.search) parts.push('search=' + encodeURIComponent(state.search));\n"
    "    if (state.value !== initialValue) parts.push('value=' + state.value);\n"
    "    var hash = parts.length ? '#' + parts.join('&') : '';\n"
    "    if (hash === location.hash) return;\n"
    "    try {\n"
    "      // replaceState, not location.hash =: no history entry per keystroke, no hashchange.\n"
    "      history.replaceState(null, '', hash || location.pathname + location.search);\n"
    "    } catch (e) {\n"
    "      // Some browsers refuse for file: pages; the view works regardless.\n"
    "    }\n"
    "  }\n"
    "\n"
    "  // ---- Controls ----\n"
    "\n"
    "  function checkedValue(name) {\n"
    "    var r = document.querySelector('input[name=' + name + ']:checked');\n"
    "    return r ? r.value : '';\n"
    "  }\n"
    "\n"
    "  // Checks the radio button of group name with value v. The checked attribute follows too,\n"
    "  // so that a dump of the DOM shows the state.\n"
    "  function setChecked(name, v) {\n"
    "    document.querySelectorAll('input[name=' + name + ']').forEach(function (r) {\n"
    "      r.checked = r.defaultChecked = r.value === v;\n"
    "    });\n"
    "  }\n"
    "\n"
    "  function syncControls() {\n"
    "    var parts = state.value.split('_');\n"
    "    setChecked('hs-kind', parts[0]);\n"
    "    setChecked('hs-unit', parts[1]);\n"
    "    var box = byId('hs-search');\n"
    "    if (box.value !== state.search) box.value = state.search;\n"
    "    box.defaultValue = state.search;\n"
    "  }\n"
    "\n"
    "  function frameAt(target) {\n"
    "    var f = target.closest ? target.closest('.hs-f') : null;\n"
    "    return f ? Number(f.getAttribute('data-id')) : -1;\n"
    "  }\n"
    "\n"
    "  function hideTip() {\n"
    "    tip.style.display = 'none';\n"
    "    if (hovered >= 0) {\n"
    "      hovered = -1;\n"
    "      setLines(byId('hs-details'), details(state.zoom));\n"
    "    }\n"
    "  }\n"
    "\n"
    "  function onMove(e) {\n"
    "    var id = frameAt(e.target);\n"
    "    if (id < 0) return hideTip();\n"
    "    if (id !== hovered) {\n"
    "      hovered = id;\n"
    "      var lines = details(id);\n"
    "      setLines(tip, lines);\n"
    "      setLines(byId('hs-details'), lines);\n"
    "    }\n"
    "    tip.style.display = 'block';\n"
    "    // Keep the tip inside the window: left of the pointer near the right edge, above it\n"
    "    // near the bottom.\n"
    "    var w = tip.offsetWidth;\n"
    "    var h = tip.offsetHeight;\n"
    "    tip.style.left = Math.max(0, Math.min(e.clientX + 12, innerWidth - w - 4)) + 'px';\n"
    "    var below = e.clientY + 16 + h <= innerHeight;\n"
    "    tip.style.top = (below ? e.clientY + 16 : Math.max(0, e.clientY - h - 8)) + 'px';\n"
    "  }\n"
    "\n"
    "  function onKey(e) {\n"
    "    var box = byId('hs-search');\n"
    "    if (e.key === 'Escape') {\n"
    "      if (e.target === box && state.search) search('');\n"
    "      else zoomTo(0);\n"
    "    } else if (e.key === '/' && e.target !== box) {\n"
    "      e.preventDefault();\n"
    "      box.focus();\n"
    "    }\n"
    "  }\n"
    "\n"
    "  function wire() {\n"
    "    chart.addEventListener('click', function (e) {\n"
    "      var id = frameAt(e.target);\n"
    "      if (id >= 0) zoomTo(id);\n"
    "    });\n"
    "    chart.addEventListener('mousemove', onMove);\n"
    "    chart.addEventListener('mouseleave', hideTip);\n"
    "    document.querySelectorAll('#hs-controls input[type=radio]').forEach(function (r) {\n"
    "      r.addEventListener('change', function () {\n"
    "        setValue((checkedValue('hs-kind') || 'inuse') + '_' + checkedValue('hs-unit'));\n"
    "      });\n"
    "    });\n"
    "    byId('hs-search').addEventListener('input', function (e) { search(e.target.value); });\n"
    "    byId('hs-reset').addEventListener('click', function () { zoomTo(0); });\n"
    "    document.addEventListener('keydown', onKey);\n"
    "    window.addEventListener('hashchange', function () {\n"
    "      readHash();\n"
    "      render();\n"
    "    });\n"
    "    window.addEventListener('resize', scheduleRender);\n"
    "  }\n"
    "\n"
    "  buildTree();\n"
    "  window.heapscopeFlame = {\n"
    "    zoomTo: zoomTo,\n"
    "    search: search,\n"
    "    setValue: setValue,\n"
    "    state: snapshot,\n"
    "    details: function (id) { return resolve(id) >= 0 ? details(resolve(id)) : null; }\n"
    "  };\n"
    "  wire();\n"
    "  readHash();\n"
    "  update();\n"
    "})();\n";

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
    fputs(page_css, out);
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
    fputs(page_js, out);
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
