/* fuzz_pprof.c: libFuzzer target for the pprof reader (src/common/pprof.c).
 *
 * The input is given to hs_pprof_read as a whole file (gzip, zlib or raw protobuf). Beyond the
 * sanitizers, it traps when the reader breaks its contract:
 *  - a failure must leave *out NULL and give a one-line message with a byte offset;
 *  - a success must give a consistent model: every sample has one value per sample type and
 *    only existing location ids, every line's function and every location's mapping is 0 or
 *    exists, ids are nonzero and found by the index getters, no string is NULL;
 *  - the model written back (raw) must read again and write the very same bytes, and the gzip
 *    form must read too.
 */
#include "pprof.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

static void check_model(const struct hs_pprof *p)
{
    size_t ntypes = hs_pprof_num_sample_types(p);
    for (size_t i = 0; i < ntypes; i++) {
        struct hs_pprof_value_type vt = hs_pprof_sample_type_at(p, i);
        REQUIRE(vt.type && vt.unit);
    }
    REQUIRE(hs_pprof_num_strings(p) >= 1 && hs_pprof_string_at(p, 0)[0] == '\0');
    REQUIRE(hs_pprof_default_sample_type(p) && hs_pprof_drop_frames(p) && hs_pprof_keep_frames(p));
    for (size_t i = 0; i < hs_pprof_num_comments(p); i++)
        REQUIRE(hs_pprof_comment_at(p, i) != NULL);

    for (size_t i = 0; i < hs_pprof_num_mappings(p); i++) {
        struct hs_pprof_mapping_view m = hs_pprof_mapping_at(p, i);
        REQUIRE(m.id != 0 && m.filename && m.build_id);
        REQUIRE(hs_pprof_mapping_index(p, m.id) == i);
    }
    for (size_t i = 0; i < hs_pprof_num_functions(p); i++) {
        struct hs_pprof_function_view f = hs_pprof_function_at(p, i);
        REQUIRE(f.id != 0 && f.name && f.system_name && f.filename);
        REQUIRE(hs_pprof_function_index(p, f.id) == i);
    }
    for (size_t i = 0; i < hs_pprof_num_locations(p); i++) {
        struct hs_pprof_location_view l = hs_pprof_location_at(p, i);
        REQUIRE(l.id != 0 && hs_pprof_location_index(p, l.id) == i);
        REQUIRE(l.mapping_id == 0 || hs_pprof_mapping_index(p, l.mapping_id) != HS_PPROF_NONE);
        for (size_t j = 0; j < l.num_lines; j++)
            REQUIRE(l.lines[j].function_id == 0 ||
                    hs_pprof_function_index(p, l.lines[j].function_id) != HS_PPROF_NONE);
    }
    for (size_t i = 0; i < hs_pprof_num_samples(p); i++) {
        struct hs_pprof_sample_view s = hs_pprof_sample_at(p, i);
        REQUIRE(s.num_values == ntypes);
        for (size_t j = 0; j < s.num_locations; j++)
            REQUIRE(hs_pprof_location_index(p, s.location_ids[j]) != HS_PPROF_NONE);
        for (size_t j = 0; j < s.num_values; j++)
            (void)s.values[j]; /* readable */
        for (size_t j = 0; j < s.num_labels; j++) {
            struct hs_pprof_label l = hs_pprof_sample_label_at(p, i, j);
            REQUIRE(l.key && l.str && l.num_unit);
        }
    }
}

/* Writes p to memory; NULL on failure. */
static char *write_mem(struct hs_pprof *p, bool gzip, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f == NULL)
        return NULL;
    int rc = hs_pprof_write(p, f, gzip);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hs_pprof *p = (struct hs_pprof *)&p; /* must be replaced */
    char err[256];
    memset(err, 'x', sizeof(err));
    if (hs_pprof_read(data, size, &p, err, sizeof(err)) != 0) {
        REQUIRE(p == NULL);
        size_t n = strnlen(err, sizeof(err));
        REQUIRE(n > 0 && n < sizeof(err) && memchr(err, '\n', n) == NULL);
        REQUIRE(strstr(err, "(at byte ") != NULL);
        return 0;
    }
    REQUIRE(p != NULL && hs_pprof_error(p) == 0);
    check_model(p);

    size_t len1 = 0, len2 = 0, gz_len = 0;
    char *w1 = write_mem(p, false, &len1);
    REQUIRE(w1 != NULL);
    struct hs_pprof *q = NULL;
    REQUIRE(hs_pprof_read(w1, len1, &q, err, sizeof(err)) == 0);
    check_model(q);
    char *w2 = write_mem(q, false, &len2);
    REQUIRE(w2 != NULL && len2 == len1 && memcmp(w1, w2, len1) == 0);
    REQUIRE(hs_pprof_num_samples(q) == hs_pprof_num_samples(p));

    char *gz = write_mem(q, true, &gz_len);
    REQUIRE(gz != NULL);
    struct hs_pprof *g = NULL;
    REQUIRE(hs_pprof_read(gz, gz_len, &g, err, sizeof(err)) == 0);
    REQUIRE(hs_pprof_num_locations(g) == hs_pprof_num_locations(p));

    hs_pprof_free(g);
    free(gz);
    free(w2);
    hs_pprof_free(q);
    free(w1);
    hs_pprof_free(p);
    return 0;
}
