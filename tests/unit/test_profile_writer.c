/* test_profile_writer.c: unit tests of the profiler daemon's output
 * (src/profiler/daemon/profile_writer.c).
 *
 * A tracker is filled with stacks made of pcs of this test's own functions (their addresses
 * + 1), plus a pc in no mapping; the symbolizer gets this process's mappings and the meta
 * this process's maps text. Then:
 *  - pprof: written to a temporary file and read back with hs_pprof_read: sample types,
 *    default type, period, time, comments, the exact values of every sample (now and at the
 *    peak), one location per distinct pc with the functions' names, file and line, the
 *    mapping of this executable (path, range, offset, 40-hex-digit build id, has_* flags),
 *    the unmapped pc without mapping or lines; a custom heap; no symbolizer; no maps.
 *  - Android: parsed with the report's hs_dump_parse: the header values, the records
 *    (grouped by stack and size, in malloc debug's order, with rounded counts) and the maps;
 *    maps without a final newline, and no maps at all.
 *  - Write errors (/dev/full) come back as -1 with errno set.
 */
#include "check.h"
#include "heap_dump_reader.h"
#include "heap_tracker.h"
#include "pprof.h"
#include "proc_maps.h"
#include "profile_writer.h"
#include "symbolizer.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__clang__)
#define TEST_NOINLINE __attribute__((noinline))
#else
#define TEST_NOINLINE __attribute__((noinline, noipa))
#endif

TEST_NOINLINE static int pw_leaf(int x)
{
    return x * 7 + 3;
}

TEST_NOINLINE static int pw_middle(int x)
{
    return pw_leaf(x) + 11;
}

TEST_NOINLINE static int pw_outer(int x)
{
    return pw_middle(x) * 5;
}

static uintptr_t PC_LEAF, PC_MID, PC_OUT;
static const uintptr_t PC_NOMAP = 0x10;

/* ---- Helpers ---------------------------------------------------------------------------- */

static char *slurp_stream(FILE *f, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

static char *read_maps(size_t *len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return NULL;
    char *text = slurp_stream(f, len);
    fclose(f);
    return text;
}

/* Runs a writer into a temporary file and returns what it wrote (and its return value). */
struct output {
    char *data;
    size_t len;
    int rc;
};

static struct output write_pprof(const struct hs_tracker *t, uint32_t heap,
                                 struct hs_symbolizer *sym, const struct hs_profile_meta *meta)
{
    struct output o = {NULL, 0, -1};
    FILE *f = tmpfile();
    if (!f)
        return o;
    o.rc = hs_profile_write_pprof(t, heap, sym, meta, f);
    rewind(f);
    o.data = slurp_stream(f, &o.len);
    fclose(f);
    return o;
}

static struct output write_android(const struct hs_tracker *t, uint32_t heap,
                                   const struct hs_profile_meta *meta)
{
    struct output o = {NULL, 0, -1};
    FILE *f = tmpfile();
    if (!f)
        return o;
    o.rc = hs_profile_write_android(t, heap, meta, f);
    rewind(f);
    o.data = slurp_stream(f, &o.len);
    fclose(f);
    return o;
}

static struct hs_pprof *read_pprof(const struct output *o)
{
    struct hs_pprof *p = NULL;
    char err[256] = "";
    if (!CHECK_EQ(o->rc, 0) || !CHECK(o->data != NULL))
        return NULL;
    if (!CHECK_EQ(hs_pprof_read(o->data, o->len, &p, err, sizeof(err)), 0))
        fprintf(stderr, "    %s\n", err);
    return p;
}

static bool is_hex40(const char *s)
{
    if (strlen(s) != 40)
        return false;
    for (const char *c = s; *c; c++)
        if (!isxdigit((unsigned char)*c) || isupper((unsigned char)*c))
            return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The sample whose stack (its locations' addresses) is pcs[0..n), or SIZE_MAX. */
static size_t find_sample(const struct hs_pprof *p, const uintptr_t *pcs, size_t n)
{
    for (size_t s = 0; s < hs_pprof_num_samples(p); s++) {
        struct hs_pprof_sample_view v = hs_pprof_sample_at(p, s);
        if (v.num_locations != n)
            continue;
        size_t i = 0;
        for (; i < n; i++) {
            size_t li = hs_pprof_location_index(p, v.location_ids[i]);
            if (li == HS_PPROF_NONE || hs_pprof_location_at(p, li).address != pcs[i])
                break;
        }
        if (i == n)
            return s;
    }
    return SIZE_MAX;
}

static void check_sample_at(const struct hs_pprof *p, const uintptr_t *pcs, size_t n, int64_t ao,
                            int64_t ab, int64_t io, int64_t ib, int line)
{
    size_t s = find_sample(p, pcs, n);
    if (!check_at(s != SIZE_MAX, __FILE__, line, "sample found"))
        return;
    struct hs_pprof_sample_view v = hs_pprof_sample_at(p, s);
    if (!check_at(v.num_values == 4, __FILE__, line, "4 values"))
        return;
    bool ok = v.values[0] == ao && v.values[1] == ab && v.values[2] == io && v.values[3] == ib;
    if (!check_at(ok, __FILE__, line, "sample values"))
        fprintf(stderr, "    got %lld %lld %lld %lld, expected %lld %lld %lld %lld\n",
                (long long)v.values[0], (long long)v.values[1], (long long)v.values[2],
                (long long)v.values[3], (long long)ao, (long long)ab, (long long)io, (long long)ib);
}
#define CHECK_SAMPLE(p, pcs, n, ao, ab, io, ib) check_sample_at(p, pcs, n, ao, ab, io, ib, __LINE__)

/* The location at address pc, or a zeroed view. */
static struct hs_pprof_location_view location_of(const struct hs_pprof *p, uintptr_t pc,
                                                 size_t *count)
{
    struct hs_pprof_location_view found = {0};
    *count = 0;
    for (size_t i = 0; i < hs_pprof_num_locations(p); i++) {
        struct hs_pprof_location_view l = hs_pprof_location_at(p, i);
        if (l.address == pc) {
            found = l;
            (*count)++;
        }
    }
    return found;
}

/* ---- The scenario ----------------------------------------------------------------------- */

static uintptr_t S1[3], S2[2], S3[3];

/* seq 1-7 allocate (the peak is after 7), 8-9 free. See the expectations in the tests. */
static struct hs_tracker *make_tracker(void)
{
    S1[0] = PC_LEAF, S1[1] = PC_MID, S1[2] = PC_OUT;
    S2[0] = PC_MID, S2[1] = PC_OUT;
    S3[0] = PC_NOMAP, S3[1] = PC_LEAF, S3[2] = PC_OUT;
    struct hs_tracker *t = hs_tracker_new();
    CHECK(t != NULL);
    CHECK_EQ(hs_tracker_malloc(t, 0, 1, 0xA1, 100, 100, S1, 3, 1), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 2, 0xA2, 100, 100, S1, 3, 2), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 3, 0xA3, 100, 100, S1, 3, 3), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 4, 0xB1, 10, 4096, S2, 2, 4), 0); /* 409.6 objects */
    CHECK_EQ(hs_tracker_malloc(t, 0, 5, 0xC1, 1000, 1000, S3, 3, 5), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 6, 0xA4, 50, 50, S1, 3, 6), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 7, 0xB2, 100, 100, S2, 2, 7), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 8, 0xA1), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 9, 0xC1), 0);
    CHECK_EQ(hs_tracker_set_heap(t, 1, "arena", 0), 0);
    CHECK_EQ(hs_tracker_malloc(t, 1, 10, 0xD1, 64, 64, S2, 2, 10), 0);
    return t;
}

static const char *const COMMENTS[] = {"stat one", "line a\nline b\n"};

static struct hs_profile_meta make_meta(const char *maps, size_t maps_len, bool at_peak)
{
    struct hs_profile_meta m = {
        .pid = (int)getpid(),
        .time_ns = 1700000000123456789ull,
        .duration_ns = 5000000000ull,
        .interval = 4096,
        .maps = maps,
        .maps_len = maps_len,
        .comments = COMMENTS,
        .num_comments = 2,
        .at_peak = at_peak,
    };
    return m;
}

/* ---- pprof ------------------------------------------------------------------------------ */

static void check_function(const struct hs_pprof *p, uintptr_t pc, const char *name)
{
    size_t count;
    struct hs_pprof_location_view l = location_of(p, pc, &count);
    CHECK_EQ(count, 1);
    if (!CHECK(l.num_lines >= 1))
        return;
    /* The real function is the last line (the outermost). */
    size_t fi = hs_pprof_function_index(p, l.lines[l.num_lines - 1].function_id);
    if (!CHECK(fi != HS_PPROF_NONE))
        return;
    struct hs_pprof_function_view f = hs_pprof_function_at(p, fi);
    CHECK_STREQ(f.name, name);
    CHECK_STREQ(f.system_name, name);
    CHECK(ends_with(f.filename, "test_profile_writer.c"));
    CHECK(l.lines[l.num_lines - 1].line > 0);

    /* Its mapping: this executable's maps line holding pc. */
    size_t mi = hs_pprof_mapping_index(p, l.mapping_id);
    if (!CHECK(l.mapping_id != 0 && mi != HS_PPROF_NONE))
        return;
    struct hs_pprof_mapping_view m = hs_pprof_mapping_at(p, mi);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    CHECK_STREQ(m.filename, exe);
    struct hs_map real;
    CHECK(hs_maps_find(0, pc, &real));
    CHECK_EQ(m.start, real.start);
    CHECK_EQ(m.limit, real.end);
    CHECK_EQ(m.offset, real.offset);
    CHECK(is_hex40(m.build_id));
    CHECK(m.has_functions);
    CHECK(m.has_filenames);
    CHECK(m.has_line_numbers);
}

static void check_header(const struct hs_pprof *p, const struct hs_profile_meta *meta,
                         const char *heap_name)
{
    static const char *const types[4][2] = {{"alloc_objects", "count"},
                                            {"alloc_space", "bytes"},
                                            {"inuse_objects", "count"},
                                            {"inuse_space", "bytes"}};
    CHECK_EQ(hs_pprof_num_sample_types(p), 4);
    for (size_t i = 0; i < 4; i++) {
        struct hs_pprof_value_type vt = hs_pprof_sample_type_at(p, i);
        CHECK_STREQ(vt.type, types[i][0]);
        CHECK_STREQ(vt.unit, types[i][1]);
    }
    CHECK_STREQ(hs_pprof_default_sample_type(p), "inuse_space");
    CHECK_STREQ(hs_pprof_period_type(p).type, "space");
    CHECK_STREQ(hs_pprof_period_type(p).unit, "bytes");
    CHECK_EQ(hs_pprof_period(p), 4096);
    CHECK_EQ(hs_pprof_time_nanos(p), meta->time_ns);
    CHECK_EQ(hs_pprof_duration_nanos(p), meta->duration_ns);

    char first[128];
    snprintf(first, sizeof(first), "heapscope heapprofd: pid %d, heap %s", (int)getpid(),
             heap_name);
    size_t c = 0;
    CHECK_EQ(hs_pprof_num_comments(p), meta->at_peak ? 5 : 4);
    CHECK_STREQ(hs_pprof_comment_at(p, c++), first);
    if (meta->at_peak)
        CHECK_STREQ(hs_pprof_comment_at(p, c++), "in use at the peak of sampled bytes");
    CHECK_STREQ(hs_pprof_comment_at(p, c++), "stat one");
    CHECK_STREQ(hs_pprof_comment_at(p, c++), "line a");
    CHECK_STREQ(hs_pprof_comment_at(p, c++), "line b");
}

static void test_pprof(struct hs_tracker *t, struct hs_symbolizer *sym, const char *maps,
                       size_t maps_len)
{
    check_context("pprof, now");
    struct hs_profile_meta meta = make_meta(maps, maps_len, false);
    struct output o = write_pprof(t, 0, sym, &meta);
    struct hs_pprof *p = read_pprof(&o);
    if (p) {
        check_header(p, &meta, "libc.malloc");
        CHECK_EQ(hs_pprof_num_samples(p), 3);
        CHECK_SAMPLE(p, S1, 3, 4, 350, 3, 250);
        CHECK_SAMPLE(p, S2, 2, 411, 4196, 411, 4196); /* 409.6 + 1 objects */
        CHECK_SAMPLE(p, S3, 3, 1, 1000, 0, 0);
        /* One location per distinct pc. */
        CHECK_EQ(hs_pprof_num_locations(p), 4);
        check_function(p, PC_LEAF, "pw_leaf");
        check_function(p, PC_MID, "pw_middle");
        check_function(p, PC_OUT, "pw_outer");
        size_t count;
        struct hs_pprof_location_view l = location_of(p, PC_NOMAP, &count);
        CHECK_EQ(count, 1);
        CHECK_EQ(l.mapping_id, 0);
        CHECK_EQ(l.num_lines, 0);
        CHECK_EQ(hs_pprof_num_mappings(p), 1); /* the test's text; no pc elsewhere */
    }
    hs_pprof_free(p);
    free(o.data);

    check_context("pprof, at the peak");
    meta = make_meta(maps, maps_len, true);
    o = write_pprof(t, 0, sym, &meta);
    p = read_pprof(&o);
    if (p) {
        check_header(p, &meta, "libc.malloc");
        CHECK_EQ(hs_pprof_num_samples(p), 3);
        CHECK_SAMPLE(p, S1, 3, 4, 350, 4, 350);
        CHECK_SAMPLE(p, S2, 2, 411, 4196, 411, 4196);
        CHECK_SAMPLE(p, S3, 3, 1, 1000, 1, 1000);
        check_function(p, PC_LEAF, "pw_leaf");
    }
    hs_pprof_free(p);
    free(o.data);

    check_context("pprof, custom heap");
    meta = make_meta(maps, maps_len, false);
    o = write_pprof(t, 1, sym, &meta);
    p = read_pprof(&o);
    if (p) {
        check_header(p, &meta, "arena");
        CHECK_EQ(hs_pprof_num_samples(p), 1);
        CHECK_SAMPLE(p, S2, 2, 1, 64, 1, 64);
        check_function(p, PC_MID, "pw_middle");
    }
    hs_pprof_free(p);
    free(o.data);

    check_context("pprof, no symbolizer");
    o = write_pprof(t, 0, NULL, &meta);
    p = read_pprof(&o);
    if (p) {
        CHECK_EQ(hs_pprof_num_samples(p), 3);
        CHECK_SAMPLE(p, S1, 3, 4, 350, 3, 250);
        CHECK_EQ(hs_pprof_num_functions(p), 0);
        size_t count;
        struct hs_pprof_location_view l = location_of(p, PC_LEAF, &count);
        CHECK(l.mapping_id != 0 && l.num_lines == 0);
        struct hs_pprof_mapping_view m =
            hs_pprof_mapping_at(p, hs_pprof_mapping_index(p, l.mapping_id));
        CHECK(!m.has_functions && !m.has_filenames && !m.has_line_numbers);
        CHECK(m.filename[0] == '/');
    }
    hs_pprof_free(p);
    free(o.data);

    check_context("pprof, no maps");
    meta = make_meta(NULL, 0, false);
    o = write_pprof(t, 0, sym, &meta);
    p = read_pprof(&o);
    if (p) {
        CHECK_EQ(hs_pprof_num_mappings(p), 0);
        size_t count;
        struct hs_pprof_location_view l = location_of(p, PC_OUT, &count);
        CHECK(l.mapping_id == 0 && l.num_lines >= 1); /* still symbolized */
    }
    hs_pprof_free(p);
    free(o.data);

    check_context("pprof, unused and invalid heaps");
    o = write_pprof(t, 5, sym, &meta);
    p = read_pprof(&o);
    if (p)
        CHECK_EQ(hs_pprof_num_samples(p), 0);
    hs_pprof_free(p);
    free(o.data);
    errno = 0;
    o = write_pprof(t, HS_TRACKER_MAX_HEAPS, sym, &meta);
    CHECK_EQ(o.rc, -1);
    CHECK_EQ(errno, EINVAL);
    free(o.data);
    check_context(NULL);
}

/* Every pc is symbolized as it is: the unwinder returns call sites (inside the call) and
 * exact pcs. Here the first byte of pw_middle, where a signal interrupted it, is an outer
 * frame of one stack and the innermost frame of another: both name pw_middle (looked up at
 * pc - 1 it would be whatever precedes the function), with one location. */
static void test_call_sites(struct hs_symbolizer *sym, const char *maps, size_t maps_len)
{
    check_context("pprof, call sites and exact pcs");
    uintptr_t start = (uintptr_t)pw_middle;
    struct hs_frame_info as_pc[HS_SYMBOLIZE_MAX_FRAMES];
    size_t np = hs_symbolize(sym, start, 0, as_pc, HS_SYMBOLIZE_MAX_FRAMES);
    CHECK(np >= 1);
    if (np < 1)
        return;
    CHECK_STREQ(as_pc[np - 1].function, "pw_middle");

    struct hs_tracker *t = hs_tracker_new();
    const uintptr_t outer[] = {PC_LEAF, start}, inner[] = {start};
    CHECK_EQ(hs_tracker_malloc(t, 0, 1, 0x10, 8, 8, outer, 2, 0), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 2, 0x20, 8, 8, inner, 1, 0), 0);
    struct hs_profile_meta meta = make_meta(maps, maps_len, false);
    struct output o = write_pprof(t, 0, sym, &meta);
    struct hs_pprof *p = read_pprof(&o);
    if (p) {
        CHECK_EQ(hs_pprof_num_samples(p), 2);
        CHECK_EQ(hs_pprof_num_locations(p), 2);
        size_t count;
        struct hs_pprof_location_view l = location_of(p, start, &count);
        CHECK_EQ(count, 1);
        if (CHECK_EQ(l.num_lines, np)) {
            size_t fi = hs_pprof_function_index(p, l.lines[np - 1].function_id);
            CHECK(fi != HS_PPROF_NONE &&
                  strcmp(hs_pprof_function_at(p, fi).system_name, "pw_middle") == 0);
        }
    }
    hs_pprof_free(p);
    free(o.data);
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Android ---------------------------------------------------------------------------- */

static void check_record_at(const struct hs_dump *d, size_t i, uint64_t size, uint64_t num,
                            const uintptr_t *pcs, size_t n, int line)
{
    if (!check_at(i < d->num_records, __FILE__, line, "record exists"))
        return;
    const struct hs_dump_record *r = &d->records[i];
    check_eq_at(r->size, size, __FILE__, line, "size", "expected");
    check_eq_at(r->num, num, __FILE__, line, "num", "expected");
    if (!check_eq_at(r->num_frames, n, __FILE__, line, "num_frames", "expected"))
        return;
    bool same = true;
    for (size_t f = 0; f < n; f++)
        same &= r->frames[f] == pcs[f];
    check_at(same, __FILE__, line, "frames");
}
#define CHECK_RECORD(d, i, size, num, pcs, n) check_record_at(d, i, size, num, pcs, n, __LINE__)

static void test_android(struct hs_tracker *t, const char *maps, size_t maps_len)
{
    check_context("android");
    struct hs_profile_meta meta = make_meta(maps, maps_len, false);
    struct output o = write_android(t, 0, &meta);
    CHECK_EQ(o.rc, 0);
    struct hs_dump d;
    char err[256] = "";
    if (CHECK(o.data != NULL) && CHECK_EQ(hs_dump_parse(o.data, o.len, &d, err, sizeof(err)), 0)) {
        CHECK_EQ(d.version_minor, 2);
        CHECK_STREQ(d.fingerprint, "");
        CHECK_EQ(d.total_memory, 2 * 100 + 100 + 50 + 410 * 10);
        CHECK_EQ(d.backtrace_size, 3);
        CHECK_EQ(d.num_records, 4);
        /* Size descending, the deeper stack first. */
        CHECK_RECORD(&d, 0, 100, 2, S1, 3);
        CHECK_RECORD(&d, 1, 100, 1, S2, 2);
        CHECK_RECORD(&d, 2, 50, 1, S1, 3);
        CHECK_RECORD(&d, 3, 10, 410, S2, 2);
        CHECK_EQ(d.maps_len, maps_len);
        CHECK(d.maps && memcmp(d.maps, maps, maps_len) == 0);
        hs_dump_free(&d);
    } else {
        fprintf(stderr, "    %s\n", err);
    }
    /* The text itself, as malloc debug writes it. */
    char line[160];
    snprintf(line, sizeof(line), "\nz 0  sz %8u  num %4u  bt %lx %lx %lx\n", 100u, 2u,
             (unsigned long)S1[0], (unsigned long)S1[1], (unsigned long)S1[2]);
    CHECK(o.data && strstr(o.data, line) != NULL);
    static const char header[] = "Android Native Heap Dump v1.2\n\nBuild fingerprint: ''\n\n"
                                 "Total memory: 4450\nAllocation records: 4\nBacktrace size: 3\n\n"
                                 "z 0  sz ";
    CHECK(o.data && strncmp(o.data, header, sizeof(header) - 1) == 0);
    CHECK(o.data && ends_with(o.data, "\nEND\n"));
    free(o.data);

    check_context("android, custom heap and maps without a final newline");
    static const char short_maps[] = "10000-20000 r-xp 00000000 08:01 1234 /bin/x";
    meta = make_meta(short_maps, sizeof(short_maps) - 1, false);
    o = write_android(t, 1, &meta);
    CHECK_EQ(o.rc, 0);
    if (CHECK(o.data != NULL) && CHECK_EQ(hs_dump_parse(o.data, o.len, &d, err, sizeof(err)), 0)) {
        CHECK_EQ(d.num_records, 1);
        CHECK_RECORD(&d, 0, 64, 1, S2, 2);
        CHECK_EQ(d.total_memory, 64);
        CHECK_EQ(d.backtrace_size, 2);
        CHECK_EQ(d.maps_len, sizeof(short_maps));
        CHECK(d.maps && memcmp(d.maps, short_maps, sizeof(short_maps) - 1) == 0 &&
              d.maps[sizeof(short_maps) - 1] == '\n');
        hs_dump_free(&d);
    }
    free(o.data);

    check_context("android, no maps, unused heap");
    meta = make_meta(NULL, 0, false);
    o = write_android(t, 9, &meta);
    CHECK_EQ(o.rc, 0);
    if (CHECK(o.data != NULL) && CHECK_EQ(hs_dump_parse(o.data, o.len, &d, err, sizeof(err)), 0)) {
        CHECK_EQ(d.num_records, 0);
        CHECK_EQ(d.total_memory, 0);
        CHECK_EQ(d.maps_len, 0);
        hs_dump_free(&d);
    }
    free(o.data);
    check_context(NULL);
}

/* ---- Errors ----------------------------------------------------------------------------- */

static void test_write_errors(struct hs_tracker *t, struct hs_symbolizer *sym, const char *maps,
                              size_t maps_len)
{
    check_context("write errors");
    struct hs_profile_meta meta = make_meta(maps, maps_len, false);
    FILE *f = fopen("/dev/full", "w");
    if (!f) {
        printf("no /dev/full: write errors not tested\n");
        return;
    }
    errno = 0;
    CHECK_EQ(hs_profile_write_pprof(t, 0, sym, &meta, f), -1);
    CHECK(errno != 0);
    fclose(f);
    f = fopen("/dev/full", "w");
    errno = 0;
    CHECK_EQ(hs_profile_write_android(t, 0, &meta, f), -1);
    CHECK(errno != 0);
    fclose(f);
    check_context(NULL);
}

int main(void)
{
    volatile int sink = pw_outer(1);
    (void)sink;
    PC_LEAF = (uintptr_t)pw_leaf + 1;
    PC_MID = (uintptr_t)pw_middle + 1;
    PC_OUT = (uintptr_t)pw_outer + 1;

    size_t maps_len = 0;
    char *maps = read_maps(&maps_len);
    CHECK(maps != NULL && maps_len > 0);
    struct hs_symbolizer *sym = hs_symbolizer_new(NULL);
    CHECK(sym != NULL);
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(sym, 0), 0);

    struct hs_tracker *t = make_tracker();
    test_pprof(t, sym, maps, maps_len);
    test_call_sites(sym, maps, maps_len);
    test_android(t, maps, maps_len);
    test_write_errors(t, sym, maps, maps_len);

    hs_tracker_free(t);
    hs_symbolizer_free(sym);
    free(maps);
    return check_report();
}
