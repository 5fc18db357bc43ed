/* test_pprof.c: unit tests of the pprof builder, writer and reader (src/common/pprof.c).
 *
 *  - Round trip (gzip and raw) of a profile with several sample types, labels, inlined lines,
 *    comments, period, frame filters, mappings with build ids and flags; every field compared.
 *  - The exact bytes of a tiny profile, worked out by hand below (varints of 1, 2 and 10
 *    bytes, packed fields, submessages, field order, omitted zero fields).
 *  - Deduplication of strings, mappings, functions and locations; builder contract errors.
 *  - The reader on damaged input: every truncation of a raw and a gzipped profile, bad varints,
 *    lengths past the end, wrong wire types, groups, field number 0, string indices out of
 *    range, missing and duplicate ids, a first string that is not "", value counts that do not
 *    match, corrupt and trailing gzip data, a zip bomb past the default 1 GiB limit, the memory
 *    limit, and random byte mutations. Also unknown fields, unpacked repeated fields and
 *    zlib/multi-member gzip input, which must be accepted.
 *  - 100,000 samples x 32 frames: build, write and read times are printed (not asserted).
 */
#include "check.h"
#include "pprof.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

/* ---- Helpers ---- */

/* Writes p to memory; returns the malloc'd bytes (NULL on failure). */
static unsigned char *write_mem(struct hs_pprof *p, bool gz, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return NULL;
    int rc = hs_pprof_write(p, f, gz);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return (unsigned char *)buf;
}

/* Compresses data with zlib: gzip (windowBits 15+16) or zlib (15) framing. */
static unsigned char *compress_mem(const void *data, size_t len, bool gzip, size_t *out_len)
{
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, len) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* A tiny protobuf encoder for hand-made inputs. */
struct bb {
    unsigned char d[4096];
    size_t n;
};

static void bb_raw(struct bb *b, const void *data, size_t n)
{
    memcpy(b->d + b->n, data, n);
    b->n += n;
}

static void bb_varint(struct bb *b, uint64_t v)
{
    while (v >= 0x80) {
        b->d[b->n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b->d[b->n++] = (unsigned char)v;
}

static void bb_uint(struct bb *b, unsigned field, uint64_t v)
{
    bb_varint(b, (uint64_t)field << 3);
    bb_varint(b, v);
}

static void bb_bytes(struct bb *b, unsigned field, const void *data, size_t n)
{
    bb_varint(b, (uint64_t)field << 3 | 2);
    bb_varint(b, n);
    bb_raw(b, data, n);
}

static void bb_msg(struct bb *b, unsigned field, const struct bb *m)
{
    bb_bytes(b, field, m->d, m->n);
}

static void bb_str(struct bb *b, const char *s)
{
    bb_bytes(b, 6, s, strlen(s));
}

/* Reads data and expects failure with an error containing want (and, if want_off is not
 * NULL, containing it too, e.g. "(at byte 3)"). */
static void expect_fail_at(const void *data, size_t len, const char *want, const char *want_off,
                           int line)
{
    struct hs_pprof *p = (struct hs_pprof *)1;
    char err[256] = "unset";
    int rc = hs_pprof_read(data, len, &p, err, sizeof(err));
    check_at(rc == -1, __FILE__, line, "read fails");
    check_at(p == NULL, __FILE__, line, "*out is NULL on failure");
    if (!check_at(strstr(err, want) != NULL, __FILE__, line, want))
        fprintf(stderr, "    error was: %s\n", err);
    if (want_off && !check_at(strstr(err, want_off) != NULL, __FILE__, line, want_off))
        fprintf(stderr, "    error was: %s\n", err);
    if (rc == 0)
        hs_pprof_free(p);
}

#define EXPECT_FAIL(b, want, off) expect_fail_at((b)->d, (b)->n, (want), (off), __LINE__)

static struct hs_pprof *read_ok_at(const void *data, size_t len, int line)
{
    struct hs_pprof *p = NULL;
    char err[256] = "";
    int rc = hs_pprof_read(data, len, &p, err, sizeof(err));
    if (!check_at(rc == 0 && p != NULL, __FILE__, line, "read succeeds"))
        fprintf(stderr, "    error: %s\n", err);
    return rc == 0 ? p : NULL;
}

#define READ_OK(data, len) read_ok_at((data), (len), __LINE__)

/* ---- The rich profile of the round trip ---- */

static const int64_t BIG = INT64_C(0x7fffffffffffffff);

static struct hs_pprof *make_rich(void)
{
    struct hs_pprof *p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "alloc_objects", "count");
    hs_pprof_add_sample_type(p, "alloc_space", "bytes");
    hs_pprof_add_sample_type(p, "delta", "bytes");
    hs_pprof_set_period(p, "space", "bytes", 524288);
    hs_pprof_set_default_sample_type(p, "alloc_space");
    hs_pprof_set_time(p, INT64_C(1700000000123456789), INT64_C(5000000000));
    hs_pprof_set_frame_filters(p, "^malloc$", "main");
    hs_pprof_add_comment(p, "heapscope test profile");
    hs_pprof_add_comment(p, "second comment");

    uint64_t m1 = hs_pprof_mapping(p, 0x400000, 0x401000, 0, "/usr/bin/app", "abcdef0123456789");
    uint64_t m2 = hs_pprof_mapping(p, 0x7f0000000000, 0x7f0000200000, 0x1000,
                                   "/lib/x86_64-linux-gnu/libc.so.6", "00ff");
    hs_pprof_mapping_set_flags(p, m1, true, true, true, false);
    hs_pprof_mapping_set_flags(p, m2, true, false, false, true);

    uint64_t f_main = hs_pprof_function(p, "main", "main", "app.c");
    uint64_t f_inl = hs_pprof_function(p, "helper()", "_Z6helperv", "helper.h");
    uint64_t f_malloc = hs_pprof_function(p, "malloc", "malloc", NULL);

    struct hs_pprof_line inl[2] = {{f_inl, 12}, {f_main, 40}}; /* innermost first */
    struct hs_pprof_line l_main = {f_main, 41};
    struct hs_pprof_line l_malloc = {f_malloc, 0};
    uint64_t loc_a = hs_pprof_location(p, m1, 0x400123, inl, 2);
    uint64_t loc_b = hs_pprof_location(p, m1, 0x400456, &l_main, 1);
    uint64_t loc_c = hs_pprof_location(p, m2, 0x7f0000001234, &l_malloc, 1);
    uint64_t loc_d = hs_pprof_location(p, 0, 0xdeadbeef, NULL, 0); /* no mapping, no lines */

    uint64_t s1[] = {loc_c, loc_a, loc_b};
    int64_t v1[] = {1, 4096, -4096};
    hs_pprof_add_sample(p, s1, 3, v1);
    uint64_t s2[] = {loc_d};
    int64_t v2[] = {0, BIG, INT64_MIN};
    struct hs_pprof_label labels[] = {{"thread", "worker-1", 0, NULL},
                                      {"bytes", NULL, 1 << 20, "bytes"}};
    hs_pprof_add_sample_labeled(p, s2, 1, v2, labels, 2);
    int64_t v3[] = {7, 8, 9};
    hs_pprof_add_sample(p, NULL, 0, v3); /* an empty stack */
    return p;
}

/* Compares every field of q with make_rich()'s. */
static void check_rich(const struct hs_pprof *q)
{
    CHECK_EQ(hs_pprof_num_sample_types(q), 3);
    CHECK_STREQ(hs_pprof_sample_type_at(q, 0).type, "alloc_objects");
    CHECK_STREQ(hs_pprof_sample_type_at(q, 0).unit, "count");
    CHECK_STREQ(hs_pprof_sample_type_at(q, 1).type, "alloc_space");
    CHECK_STREQ(hs_pprof_sample_type_at(q, 2).unit, "bytes");
    CHECK_STREQ(hs_pprof_sample_type_at(q, 3).type, ""); /* out of range */
    CHECK_STREQ(hs_pprof_period_type(q).type, "space");
    CHECK_STREQ(hs_pprof_period_type(q).unit, "bytes");
    CHECK_EQ(hs_pprof_period(q), 524288);
    CHECK_STREQ(hs_pprof_default_sample_type(q), "alloc_space");
    CHECK_EQ(hs_pprof_time_nanos(q), INT64_C(1700000000123456789));
    CHECK_EQ(hs_pprof_duration_nanos(q), INT64_C(5000000000));
    CHECK_STREQ(hs_pprof_drop_frames(q), "^malloc$");
    CHECK_STREQ(hs_pprof_keep_frames(q), "main");
    CHECK_EQ(hs_pprof_num_comments(q), 2);
    CHECK_STREQ(hs_pprof_comment_at(q, 0), "heapscope test profile");
    CHECK_STREQ(hs_pprof_comment_at(q, 1), "second comment");
    CHECK_STREQ(hs_pprof_comment_at(q, 2), "");
    CHECK_STREQ(hs_pprof_string_at(q, 0), "");

    CHECK_EQ(hs_pprof_num_mappings(q), 2);
    struct hs_pprof_mapping_view m = hs_pprof_mapping_at(q, 0);
    CHECK_EQ(m.id, 1);
    CHECK_EQ(m.start, 0x400000);
    CHECK_EQ(m.limit, 0x401000);
    CHECK_EQ(m.offset, 0);
    CHECK_STREQ(m.filename, "/usr/bin/app");
    CHECK_STREQ(m.build_id, "abcdef0123456789");
    CHECK(m.has_functions && m.has_filenames && m.has_line_numbers && !m.has_inline_frames);
    m = hs_pprof_mapping_at(q, 1);
    CHECK_EQ(m.id, 2);
    CHECK_EQ(m.start, 0x7f0000000000);
    CHECK_EQ(m.limit, 0x7f0000200000);
    CHECK_EQ(m.offset, 0x1000);
    CHECK_STREQ(m.filename, "/lib/x86_64-linux-gnu/libc.so.6");
    CHECK_STREQ(m.build_id, "00ff");
    CHECK(m.has_functions && !m.has_filenames && !m.has_line_numbers && m.has_inline_frames);
    CHECK_EQ(hs_pprof_mapping_index(q, 2), 1);
    CHECK_EQ(hs_pprof_mapping_index(q, 3), HS_PPROF_NONE);
    CHECK_EQ(hs_pprof_mapping_index(q, 0), HS_PPROF_NONE);

    CHECK_EQ(hs_pprof_num_functions(q), 3);
    struct hs_pprof_function_view f = hs_pprof_function_at(q, 1);
    CHECK_EQ(f.id, 2);
    CHECK_STREQ(f.name, "helper()");
    CHECK_STREQ(f.system_name, "_Z6helperv");
    CHECK_STREQ(f.filename, "helper.h");
    f = hs_pprof_function_at(q, 2);
    CHECK_STREQ(f.name, "malloc");
    CHECK_STREQ(f.filename, "");
    CHECK_EQ(hs_pprof_function_index(q, 3), 2);

    CHECK_EQ(hs_pprof_num_locations(q), 4);
    struct hs_pprof_location_view l = hs_pprof_location_at(q, 0);
    CHECK_EQ(l.id, 1);
    CHECK_EQ(l.mapping_id, 1);
    CHECK_EQ(l.address, 0x400123);
    CHECK_EQ(l.num_lines, 2);
    if (l.num_lines == 2) {
        CHECK_EQ(l.lines[0].function_id, 2); /* inlined helper first */
        CHECK_EQ(l.lines[0].line, 12);
        CHECK_EQ(l.lines[1].function_id, 1);
        CHECK_EQ(l.lines[1].line, 40);
    }
    l = hs_pprof_location_at(q, 2);
    CHECK_EQ(l.mapping_id, 2);
    CHECK_EQ(l.address, 0x7f0000001234);
    CHECK_EQ(l.num_lines, 1);
    l = hs_pprof_location_at(q, 3);
    CHECK_EQ(l.id, 4);
    CHECK_EQ(l.mapping_id, 0);
    CHECK_EQ(l.address, 0xdeadbeef);
    CHECK_EQ(l.num_lines, 0);
    CHECK(!l.is_folded);
    CHECK_EQ(hs_pprof_location_index(q, 4), 3);
    CHECK_EQ(hs_pprof_location_index(q, 5), HS_PPROF_NONE);

    CHECK_EQ(hs_pprof_num_samples(q), 3);
    struct hs_pprof_sample_view s = hs_pprof_sample_at(q, 0);
    CHECK_EQ(s.num_locations, 3);
    CHECK_EQ(s.num_values, 3);
    CHECK_EQ(s.num_labels, 0);
    if (s.num_locations == 3 && s.num_values == 3) {
        CHECK_EQ(s.location_ids[0], 3);
        CHECK_EQ(s.location_ids[1], 1);
        CHECK_EQ(s.location_ids[2], 2);
        CHECK(s.values[0] == 1 && s.values[1] == 4096 && s.values[2] == -4096);
    }
    s = hs_pprof_sample_at(q, 1);
    CHECK_EQ(s.num_locations, 1);
    CHECK_EQ(s.num_labels, 2);
    if (s.num_values == 3)
        CHECK(s.values[0] == 0 && s.values[1] == BIG && s.values[2] == INT64_MIN);
    struct hs_pprof_label lb = hs_pprof_sample_label_at(q, 1, 0);
    CHECK_STREQ(lb.key, "thread");
    CHECK_STREQ(lb.str, "worker-1");
    CHECK_EQ(lb.num, 0);
    CHECK_STREQ(lb.num_unit, "");
    lb = hs_pprof_sample_label_at(q, 1, 1);
    CHECK_STREQ(lb.key, "bytes");
    CHECK_STREQ(lb.str, "");
    CHECK_EQ(lb.num, 1 << 20);
    CHECK_STREQ(lb.num_unit, "bytes");
    lb = hs_pprof_sample_label_at(q, 1, 2);
    CHECK_STREQ(lb.key, "");
    s = hs_pprof_sample_at(q, 2);
    CHECK_EQ(s.num_locations, 0);
    if (s.num_values == 3)
        CHECK(s.values[0] == 7 && s.values[2] == 9);
    s = hs_pprof_sample_at(q, 3);
    CHECK(s.num_locations == 0 && s.num_values == 0 && s.location_ids == NULL);
}

static void test_round_trip(void)
{
    check_context("round trip");
    struct hs_pprof *p = make_rich();
    CHECK_EQ(hs_pprof_error(p), 0);
    check_rich(p); /* the builder's own view */

    size_t gz_len = 0, raw_len = 0;
    unsigned char *gz = write_mem(p, true, &gz_len);
    unsigned char *raw = write_mem(p, false, &raw_len);
    CHECK(gz != NULL && raw != NULL);
    if (gz == NULL || raw == NULL)
        return;
    CHECK(gz_len > 18 && gz[0] == 0x1f && gz[1] == 0x8b);
    CHECK(raw[0] == 0x0a); /* field 1, length-delimited: the first sample type */

    struct hs_pprof *q = READ_OK(gz, gz_len);
    if (q) {
        check_rich(q);
        /* Writing a read profile gives the same bytes. */
        size_t raw2_len = 0;
        unsigned char *raw2 = write_mem(q, false, &raw2_len);
        CHECK(raw2 != NULL && raw2_len == raw_len && memcmp(raw2, raw, raw_len) == 0);
        free(raw2);
        /* A read profile is read-only. */
        CHECK_EQ(hs_pprof_function(q, "x", NULL, NULL), 0);
        CHECK_EQ(hs_pprof_error(q), EINVAL);
        hs_pprof_free(q);
    }
    q = READ_OK(raw, raw_len);
    if (q) {
        check_rich(q);
        hs_pprof_free(q);
    }

    /* zlib framing instead of gzip, and two gzip members (the profile split in two). */
    size_t zl_len = 0;
    unsigned char *zl = compress_mem(raw, raw_len, false, &zl_len);
    CHECK(zl != NULL && zl[0] == 0x78);
    q = READ_OK(zl, zl_len);
    if (q) {
        check_rich(q);
        hs_pprof_free(q);
    }
    size_t half = raw_len / 2, g1_len = 0, g2_len = 0;
    unsigned char *g1 = compress_mem(raw, half, true, &g1_len);
    unsigned char *g2 = compress_mem(raw + half, raw_len - half, true, &g2_len);
    unsigned char *two = malloc(g1_len + g2_len);
    memcpy(two, g1, g1_len);
    memcpy(two + g1_len, g2, g2_len);
    q = READ_OK(two, g1_len + g2_len);
    if (q) {
        check_rich(q);
        hs_pprof_free(q);
    }
    free(two);
    free(g1);
    free(g2);
    free(zl);
    free(gz);
    free(raw);
    hs_pprof_free(p);
}

/* ---- Exact bytes ----
 * Strings are interned in order: 0 "", 1 "a", 2 "b", 3 "c", 4 "f". Worked out by hand:
 *   0a 04 08 01 10 02           sample_type {type 1, unit 2}
 *   0a 04 08 03 10 02           sample_type {type 3, unit 2}
 *   12 11                       sample, 17 bytes:
 *     0a 01 01                    location_id packed [1]
 *     12 0c ac 02 fe ff ff ff ff ff ff ff ff 01
 *                                 value packed [300, -2]: 300 = 0b10_0101100 -> ac 02;
 *                                 -2 = 2^64-2 -> ten bytes
 *   22 0c                       location, 12 bytes:
 *     08 01                       id 1 (mapping_id 0 omitted)
 *     18 b4 24                    address 0x1234 = 36*128 + 52 -> b4 24
 *     22 05 08 01 10 ac 02        line {function_id 1, line 300}
 *   2a 04 08 01 10 04           function {id 1, name 4} (system_name, filename 0: omitted)
 *   32 00  32 01 61  32 01 62  32 01 63  32 01 66     string_table
 *   5a 04 08 01 10 02           period_type {type 1, unit 2}
 *   60 96 01                    period 150 = 1*128 + 22 -> 96 01
 */
static const unsigned char TINY[] = {
    0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x0a, 0x04, 0x08, 0x03, 0x10, 0x02, 0x12, 0x11, 0x0a,
    0x01, 0x01, 0x12, 0x0c, 0xac, 0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x01, 0x22, 0x0c, 0x08, 0x01, 0x18, 0xb4, 0x24, 0x22, 0x05, 0x08, 0x01, 0x10, 0xac, 0x02,
    0x2a, 0x04, 0x08, 0x01, 0x10, 0x04, 0x32, 0x00, 0x32, 0x01, 0x61, 0x32, 0x01, 0x62, 0x32,
    0x01, 0x63, 0x32, 0x01, 0x66, 0x5a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x60, 0x96, 0x01};

static struct hs_pprof *make_tiny(void)
{
    struct hs_pprof *p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "a", "b");
    hs_pprof_add_sample_type(p, "c", "b");
    uint64_t f = hs_pprof_function(p, "f", NULL, NULL);
    struct hs_pprof_line line = {f, 300};
    uint64_t loc = hs_pprof_location(p, 0, 0x1234, &line, 1);
    int64_t v[] = {300, -2};
    hs_pprof_add_sample(p, &loc, 1, v);
    hs_pprof_set_period(p, "a", "b", 150);
    return p;
}

static void test_exact_bytes(void)
{
    check_context("exact bytes");
    struct hs_pprof *p = make_tiny();
    size_t len = 0;
    unsigned char *raw = write_mem(p, false, &len);
    CHECK_EQ(len, sizeof(TINY));
    if (raw && len == sizeof(TINY)) {
        for (size_t i = 0; i < len; i++)
            if (!CHECK_EQ(raw[i], TINY[i]))
                fprintf(stderr, "    at byte %zu\n", i);
    }
    /* The gzip form inflates to the same bytes. */
    size_t gz_len = 0;
    unsigned char *gz = write_mem(p, true, &gz_len);
    unsigned char out[256];
    uLongf out_len = sizeof(out);
    z_stream z = {0};
    CHECK(gz != NULL && inflateInit2(&z, 15 + 16) == Z_OK);
    if (gz) {
        z.next_in = gz;
        z.avail_in = (uInt)gz_len;
        z.next_out = out;
        z.avail_out = (uInt)out_len;
        CHECK_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
        CHECK_EQ(z.total_out, sizeof(TINY));
        CHECK(memcmp(out, TINY, sizeof(TINY)) == 0);
        inflateEnd(&z);
    }
    /* And the hand-made bytes read back. */
    struct hs_pprof *q = READ_OK(TINY, sizeof(TINY));
    if (q) {
        struct hs_pprof_sample_view s = hs_pprof_sample_at(q, 0);
        CHECK(s.num_values == 2 && s.values[0] == 300 && s.values[1] == -2);
        CHECK_EQ(hs_pprof_location_at(q, 0).lines[0].line, 300);
        CHECK_STREQ(hs_pprof_function_at(q, 0).name, "f");
        CHECK_EQ(hs_pprof_period(q), 150);
        CHECK_EQ(hs_pprof_num_strings(q), 5);
        hs_pprof_free(q);
    }
    free(gz);
    free(raw);
    hs_pprof_free(p);
}

/* ---- Deduplication and builder contract ---- */

static void test_dedup(void)
{
    check_context("dedup");
    struct hs_pprof *p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "space", "bytes");
    size_t nstr = hs_pprof_num_strings(p);
    hs_pprof_add_comment(p, "space"); /* already a string */
    CHECK_EQ(hs_pprof_num_strings(p), nstr);

    uint64_t m1 = hs_pprof_mapping(p, 0x1000, 0x2000, 0, "/a", "id1");
    CHECK_EQ(m1, 1);
    CHECK_EQ(hs_pprof_mapping(p, 0x1000, 0x9999, 5, "/a", "other"), m1); /* same (start, file) */
    uint64_t m2 = hs_pprof_mapping(p, 0x1000, 0x2000, 0, "/b", "id1");
    uint64_t m3 = hs_pprof_mapping(p, 0x3000, 0x4000, 0, "/a", NULL);
    CHECK(m2 == 2 && m3 == 3);
    CHECK_EQ(hs_pprof_mapping_at(p, 0).limit, 0x2000); /* the first one's */
    CHECK_STREQ(hs_pprof_mapping_at(p, 2).build_id, "");
    CHECK_EQ(hs_pprof_num_mappings(p), 3);
    /* A mapping of its own: same (start, file), another build; never found by dedup. */
    uint64_t m4 = hs_pprof_add_mapping(p, 0x1000, 0x2000, 0, "/a", "id2");
    CHECK_EQ(m4, 4);
    CHECK_STREQ(hs_pprof_mapping_at(p, 3).build_id, "id2");
    CHECK_EQ(hs_pprof_mapping(p, 0x1000, 0x2000, 0, "/a", "id2"), m1);
    CHECK_EQ(hs_pprof_num_mappings(p), 4);

    uint64_t f1 = hs_pprof_function(p, "foo", "_Z3foov", "foo.c");
    CHECK_EQ(hs_pprof_function(p, "foo", "_Z3foov", "foo.c"), f1);
    uint64_t f2 = hs_pprof_function(p, "foo", "foo", "foo.c");
    uint64_t f3 = hs_pprof_function(p, "foo", "_Z3foov", NULL);
    CHECK(f2 != f1 && f3 != f1 && f3 != f2);
    CHECK_EQ(hs_pprof_function(p, "foo", "_Z3foov", ""), f3); /* NULL is "" */
    CHECK_EQ(hs_pprof_num_functions(p), 3);

    struct hs_pprof_line la = {f1, 10}, lb = {f2, 20};
    uint64_t l1 = hs_pprof_location(p, m1, 0x1100, &la, 1);
    CHECK_EQ(hs_pprof_location(p, m1, 0x1100, &lb, 1), l1); /* lines ignored with an address */
    CHECK_EQ(hs_pprof_location_at(p, 0).lines[0].function_id, f1);
    uint64_t l2 = hs_pprof_location(p, m2, 0x1100, &la, 1); /* other mapping */
    uint64_t l3 = hs_pprof_location(p, m1, 0x1104, &la, 1);
    uint64_t l4 = hs_pprof_location(p, 0, 0, &la, 1); /* no address: the lines are the key */
    uint64_t l5 = hs_pprof_location(p, 0, 0, &lb, 1);
    CHECK_EQ(hs_pprof_location(p, 0, 0, &la, 1), l4);
    struct hs_pprof_line both[2] = {la, lb};
    uint64_t l6 = hs_pprof_location(p, 0, 0, both, 2);
    CHECK(l2 != l1 && l3 != l1 && l4 != l5 && l6 != l4 && l6 != l5);
    uint64_t l7 = hs_pprof_location(p, m4, 0x1100, &lb, 1); /* m1's address, m4's code */
    CHECK(l7 != l1);
    CHECK_EQ(hs_pprof_location_at(p, 6).lines[0].function_id, f2);
    CHECK_EQ(hs_pprof_num_locations(p), 7);

    int64_t v = 8;
    hs_pprof_add_sample(p, &l1, 1, &v);
    hs_pprof_add_sample(p, &l1, 1, &v); /* samples are not merged */
    CHECK_EQ(hs_pprof_num_samples(p), 2);
    CHECK_EQ(hs_pprof_error(p), 0);

    /* Many strings: the string map grows and keeps every entry. */
    char name[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof(name), "fn%d", i);
        hs_pprof_function(p, name, name, "big.c");
    }
    size_t n = hs_pprof_num_functions(p);
    for (int i = 0; i < 20000; i += 997) {
        snprintf(name, sizeof(name), "fn%d", i);
        CHECK_EQ(hs_pprof_function(p, name, name, "big.c"), 4 + (uint64_t)i);
    }
    CHECK_EQ(hs_pprof_num_functions(p), n);
    CHECK_EQ(n, 20003);
    hs_pprof_free(p);

    /* Contract violations make the profile failed, and the write fails with the reason. */
    check_context("builder errors");
    p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "a", "b");
    uint64_t bad = 7;
    hs_pprof_add_sample(p, &bad, 1, &v); /* no such location */
    CHECK_EQ(hs_pprof_error(p), EINVAL);
    CHECK_EQ(hs_pprof_function(p, "x", NULL, NULL), 0); /* later calls do nothing */
    CHECK_EQ(hs_pprof_num_functions(p), 0);
    FILE *f = fopen("/dev/null", "w");
    errno = 0;
    CHECK_EQ(hs_pprof_write(p, f, true), -1);
    CHECK_EQ(errno, EINVAL);
    hs_pprof_free(p);

    p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "a", "b");
    hs_pprof_add_sample(p, NULL, 0, &v);
    hs_pprof_add_sample_type(p, "c", "d"); /* after a sample */
    CHECK_EQ(hs_pprof_error(p), EINVAL);
    hs_pprof_free(p);

    p = hs_pprof_new();
    struct hs_pprof_line lx = {3, 1}; /* no such function */
    CHECK_EQ(hs_pprof_location(p, 0, 0x10, &lx, 1), 0);
    CHECK_EQ(hs_pprof_error(p), EINVAL);
    hs_pprof_free(p);

    p = hs_pprof_new();
    CHECK_EQ(hs_pprof_location(p, 2, 0x10, NULL, 0), 0); /* no such mapping */
    CHECK_EQ(hs_pprof_error(p), EINVAL);
    hs_pprof_free(p);

    /* An empty profile writes and reads. */
    p = hs_pprof_new();
    size_t len = 0;
    unsigned char *raw = write_mem(p, false, &len);
    CHECK(raw != NULL && len == 2 && raw[0] == 0x32 && raw[1] == 0x00);
    struct hs_pprof *q = raw ? READ_OK(raw, len) : NULL;
    CHECK(q && hs_pprof_num_samples(q) == 0 && hs_pprof_num_strings(q) == 1);
    hs_pprof_free(q);
    free(raw);
    /* A write error is reported. */
    FILE *ro = fopen("/dev/null", "r");
    errno = 0;
    CHECK_EQ(hs_pprof_write(p, ro, false), -1);
    CHECK(errno != 0);
    fclose(ro);
    fclose(f);
    hs_pprof_free(p);
    CHECK_EQ(hs_pprof_error(NULL), EINVAL);
    hs_pprof_free(NULL);
}

/* ---- Damaged input ---- */

static void test_truncations(void)
{
    check_context("truncations");
    struct hs_pprof *p = make_rich();
    size_t raw_len = 0, gz_len = 0;
    unsigned char *raw = write_mem(p, false, &raw_len);
    unsigned char *gz = write_mem(p, true, &gz_len);
    hs_pprof_free(p);
    if (!raw || !gz)
        return;
    /* Every prefix of the raw profile: a clean failure, or (cut at a top-level field boundary
     * late enough) a smaller valid profile. A copy of exactly len bytes lets ASan see overreads. */
    int failed = 0, messages = 0;
    for (size_t len = 0; len < raw_len; len++) {
        unsigned char *cut = malloc(len ? len : 1);
        memcpy(cut, raw, len);
        struct hs_pprof *q = NULL;
        char err[256] = "";
        if (hs_pprof_read(cut, len, &q, err, sizeof(err)) != 0) {
            failed++;
            messages += strstr(err, "(at byte ") != NULL;
        }
        hs_pprof_free(q);
        free(cut);
    }
    CHECK(failed > (int)raw_len * 9 / 10);
    CHECK_EQ(messages, failed);
    /* Every prefix of the gzipped one fails (the trailer is missing). */
    int gz_failed = 0, gz_truncated = 0;
    for (size_t len = 0; len < gz_len; len++) {
        unsigned char *cut = malloc(len ? len : 1);
        memcpy(cut, gz, len);
        struct hs_pprof *q = NULL;
        char err[256] = "";
        if (hs_pprof_read(cut, len, &q, err, sizeof(err)) != 0)
            gz_failed++;
        gz_truncated += strstr(err, "truncated") != NULL;
        hs_pprof_free(q);
        free(cut);
    }
    CHECK_EQ(gz_failed, gz_len);
    CHECK(gz_truncated > (int)gz_len * 9 / 10);

    /* A truncation error names the offset where the data ends. */
    char err[256];
    struct hs_pprof *q = NULL;
    CHECK_EQ(hs_pprof_read(gz, gz_len - 3, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "truncated compressed data") != NULL);
    CHECK(strstr(err, "of the compressed input)") != NULL);

    /* Corrupt gzip: a flipped byte in the deflate data or the CRC. */
    unsigned char *bad = malloc(gz_len + 8);
    memcpy(bad, gz, gz_len);
    bad[gz_len - 6] ^= 0x55; /* CRC-32 */
    CHECK_EQ(hs_pprof_read(bad, gz_len, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "corrupt compressed data") != NULL);
    memcpy(bad, gz, gz_len);
    memcpy(bad + gz_len, "garbage!", 8); /* trailing bytes */
    CHECK_EQ(hs_pprof_read(bad, gz_len + 8, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "8 unexpected bytes after the end of the compressed stream") != NULL);
    char want[64];
    snprintf(want, sizeof(want), "(at byte %zu of the compressed input)", gz_len);
    CHECK(strstr(err, want) != NULL);
    /* Small err buffers are filled and terminated; no err buffer at all is fine. */
    char small[8];
    CHECK_EQ(hs_pprof_read(bad, gz_len + 8, &q, small, sizeof(small)), -1);
    CHECK_EQ(strlen(small), 7);
    CHECK_EQ(hs_pprof_read(bad, gz_len + 8, &q, NULL, 0), -1);
    CHECK_EQ(hs_pprof_read(NULL, 0, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "empty input") != NULL);
    free(bad);
    free(raw);
    free(gz);
}

static void test_malformed(void)
{
    struct bb b, m, sub;

    check_context("varints");
    b.n = 0; /* 11-byte varint as a tag */
    bb_raw(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    EXPECT_FAIL(&b, "varint longer than 10 bytes", "(at byte 0)");
    b.n = 0; /* 10 bytes, but the last one has bits past 2^64 */
    bb_raw(&b, "\x32\x00\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 13);
    EXPECT_FAIL(&b, "above 2^64-1", "(at byte 3)");
    b.n = 0;
    bb_raw(&b, "\x32\x00\x48\x80\x80", 5); /* time_nanos, varint cut off */
    EXPECT_FAIL(&b, "truncated varint", "(at byte 3)");
    b.n = 0;
    bb_raw(&b, "\x0a", 1); /* tag, then no length */
    EXPECT_FAIL(&b, "truncated varint (its message ends at byte 1)", "(at byte 1)");

    check_context("lengths");
    b.n = 0;
    bb_raw(&b, "\x32\x00\x0a\x05\x08", 5);
    EXPECT_FAIL(&b, "field 1 has length 5, past the end of its message (1 bytes left)",
                "(at byte 2)");
    b.n = 0; /* a huge length */
    bb_raw(&b, "\x32\x00\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 12);
    EXPECT_FAIL(&b, "past the end", "(at byte 2)");
    b.n = 0; /* a submessage whose inner length passes its own end (but not the input's) */
    bb_raw(&b, "\x12\x03\x0a\x05\x01\x32\x00", 7);
    EXPECT_FAIL(&b, "profile.sample[0]: field 1 has length 5", "(at byte 2)");
    b.n = 0; /* fixed64 field cut off */
    bb_raw(&b, "\x32\x00\x79\x01\x02", 5);
    EXPECT_FAIL(&b, "fixed64 field 15 runs past the end", "(at byte 2)");

    check_context("wire types");
    b.n = 0;
    bb_raw(&b, "\x32\x00\x10\x01", 4); /* sample as a varint */
    EXPECT_FAIL(&b, "field 2 (sample) has wire type 0 (varint), expected 2 (length-delimited)",
                "(at byte 2)");
    b.n = 0;
    bb_raw(&b, "\x32\x00\x4a\x00", 4); /* time_nanos as bytes */
    EXPECT_FAIL(&b, "field 9 (time_nanos) has wire type 2", NULL);
    b.n = 0;
    bb_raw(&b, "\x32\x00\x6d\x00\x00\x00\x00", 7); /* comment as fixed32 */
    EXPECT_FAIL(&b, "field 13 (comment) has wire type 5 (fixed32), expected 0 (varint) or 2", NULL);
    b.n = 0;
    bb_raw(&b, "\x32\x00\x0b", 3);
    EXPECT_FAIL(&b, "group wire type 3", "(at byte 2)");
    b.n = 0;
    bb_raw(&b, "\x32\x00\x0e", 3);
    EXPECT_FAIL(&b, "invalid wire type 6", NULL);
    b.n = 0;
    bb_raw(&b, "\x32\x00\x00\x00", 4);
    EXPECT_FAIL(&b, "invalid field number 0", "(at byte 2)");
    m.n = 0; /* a mapping whose filename is bytes */
    bb_bytes(&m, 5, "x", 1);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 3, &m);
    EXPECT_FAIL(&b, "profile.mapping[0]: field 5 (filename) has wire type 2", "(at byte 4)");
    m.n = 0; /* a location line given as a varint */
    bb_uint(&m, 1, 1);
    bb_uint(&m, 4, 1);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 4, &m);
    EXPECT_FAIL(&b, "profile.location[0]: field 4 (line) has wire type 0", "(at byte 6)");

    check_context("string table");
    b.n = 0;
    bb_uint(&b, 9, 5);
    EXPECT_FAIL(&b, "no string table", NULL);
    b.n = 0;
    bb_str(&b, "x");
    EXPECT_FAIL(&b, "the first string is not \"\"", "(at byte 0)");
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_uint(&m, 2, 2); /* unit: index 2 of 2 strings */
    b.n = 0;
    bb_msg(&b, 1, &m);
    bb_str(&b, "");
    bb_str(&b, "space");
    EXPECT_FAIL(&b,
                "profile.sample_type[0]: unit is string index 2, out of range (the string "
                "table has 2 entries)",
                "(at byte 4)");
    b.n = 0;
    bb_str(&b, "");
    bb_uint(&b, 14, (uint64_t)-1); /* default_sample_type -1 */
    EXPECT_FAIL(&b, "default_sample_type is string index -1, out of range", NULL);
    b.n = 0;
    bb_str(&b, "");
    bb_bytes(&b, 13, "\x00\x01", 2); /* comments [0, 1] */
    EXPECT_FAIL(&b, "comment is string index 1, out of range", "(at byte 2)");
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_uint(&m, 2, 9);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 5, &m);
    EXPECT_FAIL(&b, "profile.function[0]: name is string index 9", NULL);
    sub.n = 0; /* a label key out of range */
    bb_uint(&sub, 1, 3);
    m.n = 0;
    bb_msg(&m, 3, &sub);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 2, &m);
    EXPECT_FAIL(&b, "profile.sample[0]: label.key is string index 3", NULL);

    check_context("ids");
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_uint(&m, 2, 5); /* mapping 5 */
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 4, &m);
    EXPECT_FAIL(&b, "profile.location[0]: mapping id 5 does not exist", "(at byte 6)");
    sub.n = 0;
    bb_uint(&sub, 1, 3); /* function 3 */
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_msg(&m, 4, &sub);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 4, &m);
    EXPECT_FAIL(&b, "function id 3, which does not exist", "(at byte 8)");
    m.n = 0;
    bb_bytes(&m, 1, "\x01\x02", 2); /* locations 1, 2; only 1 exists */
    sub.n = 0;
    bb_uint(&sub, 1, 1);
    b.n = 0;
    bb_msg(&b, 2, &m); /* the sample comes before the location */
    bb_str(&b, "");
    bb_msg(&b, 4, &sub);
    EXPECT_FAIL(&b, "profile.sample[0]: location id 2 does not exist", "(at byte 2)");
    b.n = 0; /* duplicate location ids */
    bb_str(&b, "");
    bb_msg(&b, 4, &sub);
    bb_msg(&b, 4, &sub);
    EXPECT_FAIL(&b, "profile.location[1]: duplicate id 1 (also profile.location[0])",
                "(at byte 6)");
    m.n = 0; /* a mapping without an id */
    bb_uint(&m, 2, 0x1000);
    b.n = 0;
    bb_str(&b, "");
    bb_msg(&b, 3, &m);
    EXPECT_FAIL(&b, "profile.mapping[0]: id is 0 (ids must be nonzero)", "(at byte 2)");
    b.n = 0;
    bb_str(&b, "");
    bb_bytes(&b, 2, "\x08\x00", 2); /* a sample with location id 0 */
    EXPECT_FAIL(&b, "location id 0 does not exist", NULL);

    check_context("values");
    m.n = 0;
    bb_uint(&m, 1, 1);
    b.n = 0;
    bb_msg(&b, 1, &m);
    bb_msg(&b, 1, &m);              /* two sample types */
    bb_bytes(&b, 2, "\x10\x05", 2); /* one value */
    bb_str(&b, "");
    bb_str(&b, "t");
    EXPECT_FAIL(&b, "profile.sample[0]: 1 values for 2 sample types", "(at byte 8)");
    b.n = 0; /* a packed field whose last varint is cut */
    bb_str(&b, "");
    bb_bytes(&b, 2, "\x12\x02\x05\x85", 4);
    EXPECT_FAIL(&b, "profile.sample[0]: truncated varint (its message ends at byte 8)",
                "(at byte 7)");

    check_context("accepted encodings");
    /* Unpacked repeated fields, fields out of order, unknown fields of every wire type,
     * period_type twice (merged), a string with a NUL byte. */
    b.n = 0;
    bb_raw(&b, "\x79\x01\x02\x03\x04\x05\x06\x07\x08", 9); /* field 15, fixed64 */
    bb_raw(&b, "\x7d\x01\x02\x03\x04", 5);                 /* field 15, fixed32 */
    bb_raw(&b, "\x82\x01\x02zz", 5);                       /* field 16, bytes */
    bb_uint(&b, 100, 7);                                   /* field 100, varint */
    m.n = 0;
    bb_uint(&m, 1, 2); /* location ids 2, then 1 unpacked, then [2] packed */
    bb_uint(&m, 2, 5);
    bb_uint(&m, 1, 1);
    bb_bytes(&m, 1, "\x02", 1);
    bb_uint(&m, 9, 1); /* unknown */
    bb_msg(&b, 2, &m);
    sub.n = 0;
    bb_uint(&sub, 1, 1);
    bb_uint(&sub, 3, 0x10);
    bb_msg(&b, 4, &sub);
    sub.n = 0;
    bb_uint(&sub, 1, 2);
    bb_uint(&sub, 3, 0x20);
    bb_uint(&sub, 5, 1); /* is_folded */
    bb_msg(&b, 4, &sub);
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_msg(&b, 11, &m); /* period_type.type */
    bb_str(&b, "");
    bb_str(&b, "count");
    bb_bytes(&b, 6, "a\0b", 3);
    m.n = 0;
    bb_uint(&m, 2, 2);
    bb_msg(&b, 11, &m); /* period_type.unit, merged */
    m.n = 0;
    bb_uint(&m, 1, 1);
    bb_uint(&m, 2, 1);
    bb_msg(&b, 1, &m);  /* the sample type, after the sample */
    bb_uint(&b, 13, 1); /* an unpacked comment */
    struct hs_pprof *q = READ_OK(b.d, b.n);
    if (q) {
        struct hs_pprof_sample_view s = hs_pprof_sample_at(q, 0);
        CHECK_EQ(s.num_locations, 3);
        if (s.num_locations == 3)
            CHECK(s.location_ids[0] == 2 && s.location_ids[1] == 1 && s.location_ids[2] == 2);
        CHECK(s.num_values == 1 && s.values[0] == 5);
        CHECK(hs_pprof_location_at(q, 1).is_folded);
        CHECK_STREQ(hs_pprof_period_type(q).type, "count");
        CHECK_STREQ(hs_pprof_period_type(q).unit, "a");
        CHECK_STREQ(hs_pprof_comment_at(q, 0), "count");
        CHECK_EQ(hs_pprof_num_strings(q), 3);
        hs_pprof_free(q);
    }
    /* Ids that are not 1..n are looked up through the id maps. */
    b.n = 0;
    bb_str(&b, "");
    m.n = 0;
    bb_uint(&m, 1, 1000000007);
    bb_msg(&b, 3, &m);
    m.n = 0;
    bb_uint(&m, 1, UINT64_MAX);
    bb_uint(&m, 2, 1000000007);
    bb_msg(&b, 4, &m);
    bb_bytes(&b, 2, "\x0a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12);
    q = READ_OK(b.d, b.n);
    if (q) {
        CHECK_EQ(hs_pprof_location_index(q, UINT64_MAX), 0);
        CHECK_EQ(hs_pprof_mapping_index(q, 1000000007), 0);
        CHECK_EQ(hs_pprof_mapping_index(q, 1), HS_PPROF_NONE);
        CHECK_EQ(hs_pprof_sample_at(q, 0).location_ids[0], UINT64_MAX);
        hs_pprof_free(q);
    }
}

static void test_limits(void)
{
    check_context("limits");
    char err[256];
    struct hs_pprof *q = NULL;

    /* A small zip bomb against a small limit. */
    size_t zeros_len = 4 << 20, bomb_len = 0;
    unsigned char *zeros = calloc(1, zeros_len);
    unsigned char *bomb = compress_mem(zeros, zeros_len, true, &bomb_len);
    CHECK_EQ(hs_pprof_read_ex(bomb, bomb_len, 1 << 20, 0, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "expands to more than 1048576 bytes, the limit (a zip bomb?)") != NULL);
    CHECK(strstr(err, "of the compressed input)") != NULL);
    /* Exactly at the limit is not a bomb (it then fails as a protobuf of zeros). */
    CHECK_EQ(hs_pprof_read_ex(bomb, bomb_len, zeros_len, 0, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "invalid field number 0 (at byte 0 of the decompressed data)") != NULL);

    /* The default 1 GiB limit: 1025 gzip members of 1 MiB of zeros each (about 1 MiB). */
    size_t one_len = 0;
    unsigned char *one = compress_mem(zeros, 1 << 20, true, &one_len);
    size_t n = 1025, big_len = one_len * n;
    unsigned char *big = malloc(big_len);
    for (size_t i = 0; i < n; i++)
        memcpy(big + i * one_len, one, one_len);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(hs_pprof_read(big, big_len, &q, err, sizeof(err)), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(strstr(err, "expands to more than 1073741824 bytes") != NULL);
    printf("zip bomb of %zu bytes rejected at the 1 GiB limit in %.2f s\n", big_len,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    free(big);
    free(one);
    free(bomb);
    free(zeros);

    /* The memory limit. */
    struct hs_pprof *p = make_rich();
    size_t raw_len = 0;
    unsigned char *raw = write_mem(p, false, &raw_len);
    hs_pprof_free(p);
    CHECK_EQ(hs_pprof_read_ex(raw, raw_len, 0, 600, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "needs more than 600 bytes of memory (the limit)") != NULL);
    CHECK_EQ(hs_pprof_read_ex(raw, raw_len, 0, 1 << 20, &q, err, sizeof(err)), 0);
    hs_pprof_free(q);
    /* Many tiny samples cost memory in proportion to the input only. */
    size_t many = 1 << 20;
    unsigned char *tiny = malloc(2 * many + 2);
    tiny[0] = 0x32;
    tiny[1] = 0x00;
    for (size_t i = 0; i < many; i++) {
        tiny[2 + 2 * i] = 0x12;
        tiny[3 + 2 * i] = 0x00;
    }
    CHECK_EQ(hs_pprof_read_ex(tiny, 2 * many + 2, 0, 16 << 20, &q, err, sizeof(err)), -1);
    CHECK(strstr(err, "needs more than 16777216 bytes") != NULL);
    q = READ_OK(tiny, 2 * many + 2);
    CHECK(q && hs_pprof_num_samples(q) == many);
    hs_pprof_free(q);
    free(tiny);
    free(raw);
}

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Random byte changes to valid profiles: never a crash; when a mutant reads, it writes, and
 * what it writes reads back to the same bytes. */
static void test_mutations(void)
{
    check_context("mutations");
    struct hs_pprof *p = make_rich();
    size_t lens[2];
    unsigned char *orig[2] = {write_mem(p, false, &lens[0]), write_mem(p, true, &lens[1])};
    hs_pprof_free(p);
    int read_ok = 0, stable = 0;
    for (int k = 0; k < 2; k++) {
        unsigned char *buf = malloc(lens[k]);
        for (int iter = 0; iter < 5000; iter++) {
            memcpy(buf, orig[k], lens[k]);
            int changes = 1 + (int)(rng() % 4);
            for (int c = 0; c < changes; c++) {
                size_t at = rng() % lens[k];
                buf[at] = rng() % 3 == 0 ? (unsigned char)(buf[at] ^ (1u << (rng() % 8)))
                                         : (unsigned char)rng();
            }
            size_t len = lens[k] - (rng() % 4 == 0 ? rng() % lens[k] : 0);
            struct hs_pprof *q = NULL;
            char err[256] = "";
            if (hs_pprof_read(buf, len, &q, err, sizeof(err)) != 0) {
                if (!CHECK(strstr(err, "(at byte ") != NULL))
                    fprintf(stderr, "    error: %s\n", err);
                continue;
            }
            read_ok++;
            size_t w1_len = 0, w2_len = 0;
            unsigned char *w1 = write_mem(q, false, &w1_len);
            struct hs_pprof *q2 = NULL;
            if (w1 && hs_pprof_read(w1, w1_len, &q2, err, sizeof(err)) == 0) {
                unsigned char *w2 = write_mem(q2, false, &w2_len);
                stable += w2 && w2_len == w1_len && memcmp(w1, w2, w1_len) == 0;
                free(w2);
            } else {
                fprintf(stderr, "    rewrite of a mutant does not read: %s\n", err);
            }
            hs_pprof_free(q2);
            free(w1);
            hs_pprof_free(q);
        }
        free(buf);
        free(orig[k]);
    }
    CHECK_EQ(stable, read_ok);
    printf("mutations: %d of 10000 mutants read; all rewrote stably: %s\n", read_ok,
           stable == read_ok ? "yes" : "no");
}

/* ---- Scale ---- */

static double secs(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void test_scale(void)
{
    check_context("100k x 32");
    enum { SAMPLES = 100000, FRAMES = 32, ADDRS = 20000, FUNCS = 5000 };
    struct timespec t0, t1, t2, t3, t4;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct hs_pprof *p = hs_pprof_new();
    hs_pprof_add_sample_type(p, "alloc_objects", "count");
    hs_pprof_add_sample_type(p, "alloc_space", "bytes");
    hs_pprof_set_period(p, "space", "bytes", 524288);
    uint64_t maps[4];
    static char names[FUNCS][32];
    for (int i = 0; i < FUNCS; i++)
        snprintf(names[i], sizeof(names[i]), "function_%d", i);
    char file[64];
    for (int i = 0; i < 4; i++) {
        snprintf(file, sizeof(file), "/usr/lib/libscale%d.so", i);
        maps[i] = hs_pprof_mapping(p, 0x7f0000000000ull + ((uint64_t)i << 32),
                                   0x7f0000100000ull + ((uint64_t)i << 32), 0, file, "0123abcd");
    }
    /* As a profiler would: per frame, mapping + function + location, deduplicated. */
    uint64_t stack[FRAMES];
    for (int s = 0; s < SAMPLES; s++) {
        for (int f = 0; f < FRAMES; f++) {
            uint32_t a = rng() % ADDRS;
            int mi = (int)(a % 4);
            const char *name = names[a % FUNCS];
            uint64_t fn = hs_pprof_function(p, name, name, "scale.c");
            struct hs_pprof_line line = {fn, (int64_t)(a % 1000)};
            stack[f] = hs_pprof_location(
                p, maps[mi], 0x7f0000000000ull + ((uint64_t)mi << 32) + a * 16ull, &line, 1);
        }
        int64_t v[2] = {1, (int64_t)(rng() % 100000)};
        hs_pprof_add_sample(p, stack, FRAMES, v);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_EQ(hs_pprof_error(p), 0);
    CHECK_EQ(hs_pprof_num_samples(p), SAMPLES);
    CHECK_EQ(hs_pprof_num_functions(p), FUNCS);
    CHECK_EQ(hs_pprof_num_locations(p), ADDRS);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ(hs_pprof_write(p, f, true), 0);
    fclose(f);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    char *raw = NULL;
    size_t raw_len = 0;
    f = open_memstream(&raw, &raw_len);
    CHECK_EQ(hs_pprof_write(p, f, false), 0);
    fclose(f);
    clock_gettime(CLOCK_MONOTONIC, &t3);
    struct hs_pprof *q = READ_OK(buf, len);
    clock_gettime(CLOCK_MONOTONIC, &t4);
    CHECK(q && hs_pprof_num_samples(q) == SAMPLES && hs_pprof_num_locations(q) == ADDRS);
    if (q) {
        struct hs_pprof_sample_view a = hs_pprof_sample_at(p, SAMPLES - 1);
        struct hs_pprof_sample_view b = hs_pprof_sample_at(q, SAMPLES - 1);
        CHECK(a.num_locations == FRAMES && b.num_locations == FRAMES &&
              memcmp(a.location_ids, b.location_ids, FRAMES * sizeof(uint64_t)) == 0);
    }
    printf("100k samples x 32 frames: build %.3f s (3.2M frame lookups), write gzip %.3f s "
           "(%zu bytes), write raw %.3f s (%zu bytes), read gzip %.3f s\n",
           secs(&t0, &t1), secs(&t1, &t2), len, secs(&t2, &t3), raw_len, secs(&t3, &t4));
    hs_pprof_free(q);
    hs_pprof_free(p);
    free(buf);
    free(raw);
}

/* profile.proto: "mapping[0] will be the main binary". A writer makes mappings as its stacks
 * meet them, a library's first when a stack starts there: the lowest file mapping is written
 * first, ids kept (locations refer to ids, not places). */
static void test_main_binary_first(void)
{
    check_context("main binary first");
    struct hs_pprof *p = hs_pprof_new();
    uint64_t anon = hs_pprof_mapping(p, 0x1000, 0x2000, 0, "[anon]", "");
    uint64_t lib = hs_pprof_mapping(p, 0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6", "c");
    uint64_t prog = hs_pprof_mapping(p, 0x555555554000, 0x555555556000, 0, "/usr/bin/prog", "p");
    uint64_t loc = hs_pprof_location(p, lib, 0x7f0000000100, NULL, 0);
    CHECK(anon && lib && prog && loc);
    uint64_t ids[1] = {loc};
    int64_t v[1] = {1};
    hs_pprof_add_sample_type(p, "alloc_objects", "count");
    hs_pprof_add_sample(p, ids, 1, v);
    size_t len = 0;
    unsigned char *raw = write_mem(p, false, &len);
    struct hs_pprof *q = raw ? READ_OK(raw, len) : NULL;
    if (q) {
        CHECK_EQ(hs_pprof_num_mappings(q), 3);
        CHECK_STREQ(hs_pprof_mapping_at(q, 0).filename, "/usr/bin/prog");
        CHECK_EQ(hs_pprof_mapping_at(q, 0).id, prog);
        CHECK_STREQ(hs_pprof_mapping_at(q, 1).filename, "[anon]");
        CHECK_EQ(hs_pprof_mapping_at(q, 1).id, anon);
        CHECK_STREQ(hs_pprof_mapping_at(q, 2).filename, "/lib/libc.so.6");
        CHECK_EQ(hs_pprof_mapping_at(q, 2).id, lib);
        hs_pprof_free(q);
    }
    free(raw);
    hs_pprof_free(p);
}

int main(void)
{
    test_round_trip();
    test_main_binary_first();
    test_exact_bytes();
    test_dedup();
    test_truncations();
    test_malformed();
    test_limits();
    test_mutations();
    test_scale();
    return check_report();
}
