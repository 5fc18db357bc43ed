/* pprof.h: build, write and read pprof profiles (gzipped perftools.profiles.Profile).
 *
 * pprof's format is a protocol buffer (profile.proto), usually gzip-compressed. It is encoded
 * and decoded here by hand; zlib does the compression. One in-memory model serves both ways:
 * a builder fills it with deduplication and writes it, the reader fills it from a file and the
 * accessors below look at it.
 *
 * Format notes (profile.proto, proto3):
 *  - Profile: 1 sample_type (ValueType, repeated), 2 sample, 3 mapping, 4 location,
 *    5 function, 6 string_table (repeated string; entry 0 must be ""), 7 drop_frames,
 *    8 keep_frames (string indices), 9 time_nanos, 10 duration_nanos, 11 period_type
 *    (ValueType), 12 period, 13 comment (repeated string index, packed), 14
 *    default_sample_type (string index).
 *  - ValueType: 1 type, 2 unit (string indices).
 *  - Sample: 1 location_id (repeated uint64, packed, leaf first), 2 value (repeated int64,
 *    packed, one per sample type), 3 label.  Label: 1 key, 2 str, 3 num, 4 num_unit.
 *  - Mapping: 1 id, 2 memory_start, 3 memory_limit, 4 file_offset, 5 filename, 6 build_id
 *    (string indices), 7 has_functions, 8 has_filenames, 9 has_line_numbers,
 *    10 has_inline_frames.
 *  - Location: 1 id, 2 mapping_id (0: none), 3 address, 4 line (repeated; the innermost
 *    inlined function first, its caller last), 5 is_folded.  Line: 1 function_id (0: none),
 *    2 line.
 *  - Function: 1 id, 2 name, 3 system_name, 4 filename (string indices), 5 start_line.
 *  All integers are varints (negative int64 values take 10 bytes); ids of mappings, locations
 *  and functions are nonzero and unique per kind. The writer omits fields whose value is zero
 *  (proto3 defaults) and always writes packed repeated fields; the reader accepts packed and
 *  unpacked encodings, fields in any order, and skips fields it does not know (e.g. newer ones
 *  such as Line.column); groups (wire types 3, 4) are rejected.
 *
 * Builder: ids are 1, 2, 3... in order of creation. Strings are interned; mappings are
 * deduplicated by (start, filename) (except those of hs_pprof_add_mapping), functions by
 * (name, system_name, filename), locations by (mapping_id, address), or by (mapping_id,
 * lines) when the address is 0. Hash maps make each
 * call O(1) on average. A NULL string argument means "". A failed allocation or a contract
 * violation the builder can see (an unknown id, a sample type added after samples) makes the
 * profile "failed": hs_pprof_error() tells why, later builder calls do nothing and return 0,
 * and hs_pprof_write fails.
 *
 * Reader: the input is treated as hostile. Gzip (or zlib) input is detected by its header
 * and inflated, at most max_decoded bytes (1 GiB by default: more is rejected as a possible
 * zip bomb); anything else is taken as the raw protobuf. Every varint, tag, wire type and
 * length is checked against the end of its enclosing message; string indices, mapping,
 * function and location ids are checked to exist; each sample must have one value per sample
 * type; the model's memory is capped (max_memory, 4 GiB by default, far above what a real
 * profile of the decoded size needs). Any failure gives a message naming what was wrong and
 * its byte offset (in the decompressed data when the input was compressed). A profile
 * returned by the reader is read-only: a builder call on it fails and marks it failed (EINVAL).
 *
 * Views: accessors return small structs with strings resolved to const char * (never NULL;
 * index 0 is ""). Pointers in views stay valid until the next builder call on the profile or
 * hs_pprof_free. A string containing a NUL byte reads as its part before the NUL. Getters with
 * an index out of range return a zeroed view (with "" strings).
 *
 * Threading: a profile belongs to one thread at a time; no global state. Uses malloc, so not
 * for the malloc shim or signal handlers.
 */
#ifndef HEAPSCOPE_COMMON_PPROF_H
#define HEAPSCOPE_COMMON_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct hs_pprof; /* opaque builder and model */

/* An index getter's "not found". */
#define HS_PPROF_NONE SIZE_MAX

/* The reader's default limits. */
#define HS_PPROF_MAX_DECODED ((size_t)1 << 30) /* decompressed bytes */
#define HS_PPROF_MAX_MEMORY ((size_t)4 << 30)  /* bytes of the model's tables */

/* ---- Building ---- */

/* Returns an empty profile, or NULL (out of memory). */
struct hs_pprof *hs_pprof_new(void);

/* Frees a profile (built or read). NULL is ok. */
void hs_pprof_free(struct hs_pprof *p);

/* 0 while the profile is usable; else the errno value of its first failure (ENOMEM, or
 * EINVAL for a contract violation or a builder call on a read profile). */
int hs_pprof_error(const struct hs_pprof *p);

/* Appends a sample type (e.g. "alloc_space", "bytes"). All sample types must be added before
 * the first sample (each sample carries one value per type). */
void hs_pprof_add_sample_type(struct hs_pprof *p, const char *type, const char *unit);

/* Sets the period type and period (e.g. "space", "bytes", 524288 for a sampling interval). */
void hs_pprof_set_period(struct hs_pprof *p, const char *type, const char *unit, int64_t period);

/* Sets the sample type pprof shows by default (one of the sample types' type names). */
void hs_pprof_set_default_sample_type(struct hs_pprof *p, const char *type);

/* Sets the collection time (ns since the epoch) and its duration (ns). */
void hs_pprof_set_time(struct hs_pprof *p, int64_t time_nanos, int64_t duration_nanos);

/* Sets drop_frames and keep_frames, the regexes of frames pprof hides (NULL: unset). */
void hs_pprof_set_frame_filters(struct hs_pprof *p, const char *drop, const char *keep);

/* Appends a free-form comment line. */
void hs_pprof_add_comment(struct hs_pprof *p, const char *text);

/* Returns the id of the mapping of filename at start, creating it if (start, filename) is new
 * (a known one keeps its first limit, offset and build id). build_id: the hex build id or
 * NULL. Returns 0 on failure. */
uint64_t hs_pprof_mapping(struct hs_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
                          const char *filename, const char *build_id);

/* Appends a mapping even when one of filename at start exists, and returns its id (0 on
 * failure); hs_pprof_mapping never returns it. For a profile that merges processes or builds,
 * where the same file at the same address may hold other code: locations are keyed by
 * mapping id and address, so a mapping of their own keeps them apart. */
uint64_t hs_pprof_add_mapping(struct hs_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
                              const char *filename, const char *build_id);

/* Sets a mapping's has_* flags, which tell pprof what symbolization the profile already has
 * (has_functions: the locations in it carry function names, so pprof need not symbolize). */
void hs_pprof_mapping_set_flags(struct hs_pprof *p, uint64_t mapping_id, bool has_functions,
                                bool has_filenames, bool has_line_numbers, bool has_inline_frames);

/* Returns the id of the function (name, system_name, filename), creating it if new. name is
 * the demangled name, system_name the symbol as linked. Returns 0 on failure. */
uint64_t hs_pprof_function(struct hs_pprof *p, const char *name, const char *system_name,
                           const char *filename);

/* A location's line: a function (id, or 0 for none) and a line number (0: unknown). */
struct hs_pprof_line {
    uint64_t function_id;
    int64_t line;
};

/* Returns the id of the location at address in mapping_id (0: no mapping), creating it with
 * the num_lines lines (innermost inlined function first) if new. A known (mapping_id, address)
 * returns its location unchanged, whatever lines are passed. With address 0 the lines are
 * part of the key. lines may be NULL when num_lines is 0. Returns 0 on failure. */
uint64_t hs_pprof_location(struct hs_pprof *p, uint64_t mapping_id, uint64_t address,
                           const struct hs_pprof_line *lines, size_t num_lines);

/* A sample label, for building (NULL strings mean "") and as a view. A label is a string
 * label (key, str) or a numeric one (key, num and optionally num_unit, str ""). */
struct hs_pprof_label {
    const char *key;
    const char *str;
    int64_t num;
    const char *num_unit;
};

/* Appends a sample: the stack as location ids (leaf first) and one value per sample type
 * (values may be NULL when there are no sample types). Samples are not merged. */
void hs_pprof_add_sample(struct hs_pprof *p, const uint64_t *location_ids, size_t num_locations,
                         const int64_t *values);

/* The same with labels. */
void hs_pprof_add_sample_labeled(struct hs_pprof *p, const uint64_t *location_ids,
                                 size_t num_locations, const int64_t *values,
                                 const struct hs_pprof_label *labels, size_t num_labels);

/* Writes the profile to out, gzip-compressed (what pprof files are) or as the raw protobuf,
 * and flushes out. Returns 0, or -1 with errno set (the profile's error if it failed, the
 * stream's error, ENOMEM, or EIO when zlib fails). Works on built and read profiles; what it
 * writes for a read profile decodes to the same model (unknown fields are dropped). */
int hs_pprof_write(struct hs_pprof *p, FILE *out, bool gzip);

/* ---- Reading ---- */

/* Decodes a pprof profile, gzip/zlib-compressed or raw, into a new read-only model in *out.
 * Returns 0, or -1 with *out NULL and a one-line message in err (if err_cap > 0; truncated
 * to fit): what was wrong and at which byte offset, and errno ENOMEM (memory ran out; over
 * the max_memory limit is EINVAL) or EINVAL (not a valid profile). Uses the default limits. */
int hs_pprof_read(const void *data, size_t len, struct hs_pprof **out, char *err, size_t err_cap);

/* The same with explicit limits: max_decoded bytes of decompressed data, max_memory bytes of
 * tables in the model (0 for either: the default). */
int hs_pprof_read_ex(const void *data, size_t len, size_t max_decoded, size_t max_memory,
                     struct hs_pprof **out, char *err, size_t err_cap);

/* ---- Looking at a profile (built or read) ---- */

struct hs_pprof_value_type {
    const char *type;
    const char *unit;
};

size_t hs_pprof_num_sample_types(const struct hs_pprof *p);
struct hs_pprof_value_type hs_pprof_sample_type_at(const struct hs_pprof *p, size_t i);
/* "" when unset. */
const char *hs_pprof_default_sample_type(const struct hs_pprof *p);
struct hs_pprof_value_type hs_pprof_period_type(const struct hs_pprof *p);
int64_t hs_pprof_period(const struct hs_pprof *p);
int64_t hs_pprof_time_nanos(const struct hs_pprof *p);
int64_t hs_pprof_duration_nanos(const struct hs_pprof *p);
const char *hs_pprof_drop_frames(const struct hs_pprof *p);
const char *hs_pprof_keep_frames(const struct hs_pprof *p);
size_t hs_pprof_num_comments(const struct hs_pprof *p);
const char *hs_pprof_comment_at(const struct hs_pprof *p, size_t i);

/* The string table itself (entry 0 is ""). */
size_t hs_pprof_num_strings(const struct hs_pprof *p);
const char *hs_pprof_string_at(const struct hs_pprof *p, size_t i);

struct hs_pprof_sample_view {
    const uint64_t *location_ids; /* leaf first; every id names a location */
    size_t num_locations;
    const int64_t *values; /* num_values == hs_pprof_num_sample_types() */
    size_t num_values;
    size_t num_labels; /* see hs_pprof_sample_label_at */
};

size_t hs_pprof_num_samples(const struct hs_pprof *p);
struct hs_pprof_sample_view hs_pprof_sample_at(const struct hs_pprof *p, size_t i);
struct hs_pprof_label hs_pprof_sample_label_at(const struct hs_pprof *p, size_t sample,
                                               size_t label);

struct hs_pprof_location_view {
    uint64_t id;
    uint64_t mapping_id; /* 0: none */
    uint64_t address;
    const struct hs_pprof_line *lines; /* innermost first; function_id 0 or an existing id */
    size_t num_lines;
    bool is_folded;
};

size_t hs_pprof_num_locations(const struct hs_pprof *p);
struct hs_pprof_location_view hs_pprof_location_at(const struct hs_pprof *p, size_t i);
/* The index of the location with this id, or HS_PPROF_NONE. */
size_t hs_pprof_location_index(const struct hs_pprof *p, uint64_t id);

struct hs_pprof_function_view {
    uint64_t id;
    const char *name;
    const char *system_name;
    const char *filename;
    int64_t start_line;
};

size_t hs_pprof_num_functions(const struct hs_pprof *p);
struct hs_pprof_function_view hs_pprof_function_at(const struct hs_pprof *p, size_t i);
size_t hs_pprof_function_index(const struct hs_pprof *p, uint64_t id);

struct hs_pprof_mapping_view {
    uint64_t id;
    uint64_t start, limit, offset;
    const char *filename;
    const char *build_id;
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

size_t hs_pprof_num_mappings(const struct hs_pprof *p);
struct hs_pprof_mapping_view hs_pprof_mapping_at(const struct hs_pprof *p, size_t i);
size_t hs_pprof_mapping_index(const struct hs_pprof *p, uint64_t id);

#endif
