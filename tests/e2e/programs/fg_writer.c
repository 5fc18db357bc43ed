/* fg_writer.c: writes the flame graph page (src/report/flamegraph.c) of a built-in set of stacks,
 * for tests/e2e/test_report_html.py, which opens it in headless Chromium.
 *
 * Usage: fg_writer SCENARIO OUT.html
 *   basic   six stacks with in-use and allocated values (bytes and counts in other ratios)
 *   inuse   the same stacks, in-use values only (has_alloc false)
 *   alloc_count  basic, opening on allocated counts (hs_fg_input.value)
 *   inuse_alloc  inuse, asked to open on allocated counts, which it does not have
 *   diff    grown, shrunk, unchanged, new and vanished stacks against a base
 *   deep    a 100-frame recursion, a frame too thin to draw, a frame with self value
 *   escape  hostile frame names, title and subtitle (markup, quotes, bad UTF-8, U+2028)
 *   big     10,000 distinct stacks of depth 32 with in-use and allocated values
 *   empty   no stacks at all
 * The test knows the values of each scenario; keep the two in step.
 */
#include "flamegraph.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define STACK(f, ...)                                                                              \
    {                                                                                              \
        .frames = f, .depth = COUNT(f), __VA_ARGS__                                                \
    }

/* ---- basic / inuse ---- */

static const char *const b_parse[] = {"main", "load_config", "parse_json", "malloc"};
static const char *const b_read[] = {"main", "load_config", "read_file"};
static const char *const b_push[] = {"main", "process", "worker_loop",
                                     "std::vector<int>::push_back"};
static const char *const b_hash[] = {"main", "process", "worker_loop", "hash_insert"};
static const char *const b_cache[] = {"main", "process", "cache_fill"};
static const char *const b_thread[] = {"start_thread", "thread_main", "malloc"};

/* Values: in-use bytes, in-use count, allocated bytes, allocated count. */
static const struct hs_fg_stack basic_stacks[] = {
    STACK(b_parse, .values = {1024, 4, 4096, 16}),
    STACK(b_read, .values = {3072, 1, 3072, 1}),
    STACK(b_push, .values = {8192, 64, 32768, 512}),
    STACK(b_hash, .values = {4096, 128, 8192, 256}),
    STACK(b_cache, .values = {4096, 2, 4096, 2}),
    STACK(b_thread, .values = {4096, 1, 65536, 100}),
};

/* ---- diff ---- */

static const char *const d_grow[] = {"main", "grow", "malloc"};
static const char *const d_shrink[] = {"main", "shrink", "malloc"};
static const char *const d_same[] = {"main", "same", "malloc"};
static const char *const d_new[] = {"main", "new_cache"};
static const char *const d_gone[] = {"main", "gone"};

static const struct hs_fg_stack diff_stacks[] = {
    STACK(d_grow, .values = {8192, 8}, .base = {1024, 1}),
    STACK(d_shrink, .values = {1024, 1}, .base = {8192, 8}),
    STACK(d_same, .values = {4096, 4}, .base = {4096, 4}),
    STACK(d_new, .values = {2048, 2}, .base = {0, 0}),
    STACK(d_gone, .values = {0, 0}, .base = {4096, 4}),
};

/* ---- escape ---- */

static const char *const hostile[] = {
    "</script><b>x</b>",
    "operator<<(std::ostream&, Foo const&)",
    "a&b",
    "say \"hi\" 'there'",
    "\xc3\xbcn\xc3\xaf"
    "c\xc3\xb6"
    "d\xc3\xa9 \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x98\x80", /* üñï漢字😀 */
    "<!-- not a comment -->",
    "back\\slash",
    "bad \xff utf-8",
    "std::map<std::string, std::vector<int>>::operator[]",
    "line\xe2\x80\xa8separator",
    "]]></div><img src=x onerror=alert(1)>",
};

/* ---- deep ---- */

#define DEEP_RECURSION 100

/* ---- big ---- */

#define BIG_STACKS 10000
#define BIG_DEPTH 32
#define BIG_NAMES 1000

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    x ^= x >> 16;
    return x;
}

/* 10,000 distinct stacks: the first levels shared as in a real program (2 bits of the stack
 * number per level), the deeper ones drawn from a pool of names per stack. */
static int big(struct hs_fg_input *in)
{
    static char names[BIG_NAMES][96];
    static const char *frames[BIG_STACKS][BIG_DEPTH];
    static struct hs_fg_stack stacks[BIG_STACKS];
    for (uint32_t k = 0; k < BIG_NAMES; k++)
        snprintf(names[k], sizeof(names[k]), "app::module%u::Worker<std::vector<int>>::step%u(int)",
                 k % 37, k);
    for (uint32_t s = 0; s < BIG_STACKS; s++) {
        frames[s][0] = "main";
        for (uint32_t level = 1; level < BIG_DEPTH; level++) {
            uint32_t key = level < 8 ? (s >> (2 * (7 - level))) * 64 + level : s * 64 + level;
            frames[s][level] = names[mix(key) % BIG_NAMES];
        }
        uint32_t h = mix(s + 1);
        stacks[s] = (struct hs_fg_stack){
            .frames = frames[s],
            .depth = BIG_DEPTH,
            .values = {64 + h % 100000, 1 + h % 50, 128 + h % 300000, 1 + h % 200},
        };
    }
    in->stacks = stacks;
    in->num_stacks = BIG_STACKS;
    in->has_alloc = true;
    return 0;
}

static int deep(struct hs_fg_input *in)
{
    static const char *recursion[DEEP_RECURSION + 2];
    static const char *const thin[] = {"main", "tiny_leaf"};
    static const char *const self[] = {"main"};
    static struct hs_fg_stack stacks[3];
    recursion[0] = "main";
    for (int i = 1; i <= DEEP_RECURSION; i++)
        recursion[i] = "recurse";
    recursion[DEEP_RECURSION + 1] = "malloc";
    stacks[0] = (struct hs_fg_stack)STACK(recursion, .values = {1 << 20, 1});
    stacks[1] = (struct hs_fg_stack)STACK(thin, .values = {1, 1});
    stacks[2] = (struct hs_fg_stack)STACK(self, .values = {1 << 18, 1});
    in->stacks = stacks;
    in->num_stacks = COUNT(stacks);
    return 0;
}

static int escape(struct hs_fg_input *in)
{
    static const char *frames[COUNT(hostile)][2];
    static struct hs_fg_stack stacks[COUNT(hostile)];
    for (size_t i = 0; i < COUNT(hostile); i++) {
        frames[i][0] = "main";
        frames[i][1] = hostile[i];
        stacks[i] = (struct hs_fg_stack){
            .frames = frames[i], .depth = 2, .values = {(int64_t)(i + 1) * 1024, 1}};
    }
    in->title = "</title><script>alert(1)</script> & \"co\"";
    in->subtitle = "<b>not bold</b> 'single' \xe2\x80\xa8 \xff";
    in->stacks = stacks;
    in->num_stacks = COUNT(stacks);
    return 0;
}

static int scenario(const char *name, struct hs_fg_input *in)
{
    in->title = "fg_writer";
    in->subtitle = name;
    if (strcmp(name, "basic") == 0 || strcmp(name, "inuse") == 0 ||
        strcmp(name, "alloc_count") == 0 || strcmp(name, "inuse_alloc") == 0) {
        in->title = "heap.dump";
        in->subtitle = "6 stacks, 24.0 KiB in use";
        in->stacks = basic_stacks;
        in->num_stacks = COUNT(basic_stacks);
        in->has_alloc = strcmp(name, "basic") == 0 || strcmp(name, "alloc_count") == 0;
        /* Opening on allocated counts; without allocated values that falls back. */
        if (strcmp(name, "alloc_count") == 0 || strcmp(name, "inuse_alloc") == 0)
            in->value = HS_FG_ALLOC_COUNT;
        return 0;
    }
    if (strcmp(name, "diff") == 0) {
        in->subtitle = "diff against base.dump";
        in->stacks = diff_stacks;
        in->num_stacks = COUNT(diff_stacks);
        in->diff = true;
        return 0;
    }
    if (strcmp(name, "deep") == 0)
        return deep(in);
    if (strcmp(name, "escape") == 0)
        return escape(in);
    if (strcmp(name, "big") == 0)
        return big(in);
    if (strcmp(name, "empty") == 0)
        return 0;
    return -1;
}

int main(int argc, char **argv)
{
    struct hs_fg_input in = {0};
    if (argc != 3 || scenario(argv[1], &in) != 0) {
        fprintf(stderr, "usage: fg_writer basic|inuse|alloc_count|inuse_alloc|diff|deep|escape|"
                        "big|empty OUT.html\n");
        return 2;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        fprintf(stderr, "fg_writer: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    if (hs_flamegraph_write_html(out, &in) != 0) {
        fprintf(stderr, "fg_writer: writing %s: %s\n", argv[2], strerror(errno));
        fclose(out);
        return 1;
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "fg_writer: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    return 0;
}
