/* options.h: malloc debug's option table and parser (LIBC_DEBUG_MALLOC_OPTIONS).
 *
 * The grammar, names, aliases, defaults, ranges, order rules and error messages are
 * Android's (docs/malloc_debug.md lists them). Parsing is all-or-nothing: on the first
 * error the parser logs the error and two usage lines and returns false, and the caller
 * must leave malloc debug off. The parser never allocates (it runs inside the first malloc).
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_OPTIONS_H
#define HEAPSCOPE_MALLOC_DEBUG_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits of hs_md_config.options: what each option turns on. */
enum {
    HS_OPT_FRONT_GUARD = 1u << 0,
    HS_OPT_REAR_GUARD = 1u << 1,
    HS_OPT_BACKTRACE = 1u << 2, /* backtrace or backtrace_enable_on_signal */
    HS_OPT_BACKTRACE_DUMP_ON_EXIT = 1u << 3,
    HS_OPT_BACKTRACE_FULL = 1u << 4,
    HS_OPT_BACKTRACE_SPECIFIC_SIZES = 1u << 5, /* backtrace_size / _min_size / _max_size */
    HS_OPT_FILL_ON_ALLOC = 1u << 6,
    HS_OPT_FILL_ON_FREE = 1u << 7,
    HS_OPT_EXPAND_ALLOC = 1u << 8,
    HS_OPT_FREE_TRACK = 1u << 9,
    HS_OPT_LEAK_TRACK = 1u << 10,
    HS_OPT_RECORD_ALLOCS = 1u << 11,
    HS_OPT_RECORD_ALLOCS_ON_EXIT = 1u << 12,
    HS_OPT_VERIFY_POINTERS = 1u << 13,
    HS_OPT_ABORT_ON_ERROR = 1u << 14,
    HS_OPT_VERBOSE = 1u << 15,
    HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL = 1u << 16,
    HS_OPT_LOG_ALLOCATOR_STATS_ON_SIGNAL = 1u << 17,
    HS_OPT_LOG_ALLOCATOR_STATS_ON_EXIT = 1u << 18,
    /* heapscope's own: guarded memory (page_guard.c, sample_guard.c, guard_fault.c). */
    HS_OPT_PAGE_GUARD = 1u << 19,
    HS_OPT_SAMPLE_GUARD = 1u << 20,
    HS_OPT_SAMPLE_GUARD_RECOVER = 1u << 21,
};

/* Where a guarded block sits in its pages: its end touches the PROT_NONE page after it
 * (rear), its start follows the PROT_NONE page before it (front), or either at random per
 * allocation (sample_guard only, as GWP-ASan does). The values are the indexes of the words
 * of page_guard=rear|front and sample_guard_side=rear|front|random. */
enum hs_md_guard_side {
    HS_MD_SIDE_REAR = 0,
    HS_MD_SIDE_FRONT = 1,
    HS_MD_SIDE_RANDOM = 2,
};

/* Options that need the per-allocation header (guards). */
#define HS_OPT_HEADER_OPTIONS (HS_OPT_FRONT_GUARD | HS_OPT_REAR_GUARD)

/* Options that keep every live allocation in the pointer table. */
#define HS_OPT_TRACK_OPTIONS                                                                       \
    (HS_OPT_BACKTRACE | HS_OPT_LEAK_TRACK | HS_OPT_FREE_TRACK | HS_OPT_VERIFY_POINTERS)

#define HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX "/tmp/backtrace_heap"
#define HS_MD_DEFAULT_RECORD_ALLOCS_FILE "/tmp/record_allocs.txt"

/* Defaults of heapscope's guarded-memory options (docs/malloc_debug.md). */
#define HS_MD_DEFAULT_PAGE_GUARD_QUARANTINE_MIB 256
#define HS_MD_MAX_PAGE_GUARD_QUARANTINE_MIB 1048576
#define HS_MD_DEFAULT_SAMPLE_GUARD_RATE 5000
#define HS_MD_MAX_SAMPLE_GUARD_RATE 1000000000
#define HS_MD_DEFAULT_SAMPLE_GUARD_SLOTS 64
#define HS_MD_MAX_SAMPLE_GUARD_SLOTS 4096

struct hs_md_config {
    uint32_t options; /* HS_OPT_* bits */

    size_t front_guard_bytes; /* multiple of 16 */
    size_t rear_guard_bytes;

    size_t backtrace_frames;         /* frames per allocation backtrace */
    bool backtrace_enabled;          /* capture on from the start ("backtrace") */
    bool backtrace_enable_on_signal; /* SIGRTMAX-19 toggles capture */
    size_t backtrace_min_size;       /* only allocations in [min, max] get a backtrace */
    size_t backtrace_max_size;
    char backtrace_dump_prefix[PATH_MAX];

    size_t fill_on_alloc_bytes;
    size_t fill_on_free_bytes;
    size_t expand_alloc_bytes;

    size_t free_track_allocations;
    size_t free_track_backtrace_num_frames;

    size_t leak_track_list_max; /* leaks listed one by one at exit (leak_track=N) */

    size_t record_allocs_num_entries;
    char record_allocs_file[PATH_MAX];

    char suppressions[PATH_MAX]; /* suppressions=FILE (suppressions.h), "" for none */

    size_t page_guard_side;           /* enum hs_md_guard_side: REAR or FRONT */
    size_t page_guard_quarantine_mib; /* freed blocks' pages kept PROT_NONE, MiB */
    size_t sample_guard_rate;         /* about one allocation in N goes to a guarded slot */
    bool sample_guard_adaptive;       /* sample_guard without a value: rate kept under budget */
    size_t sample_guard_slots;        /* guarded slots reserved at start */
    size_t sample_guard_side;         /* enum hs_md_guard_side */

    uint8_t front_guard_value; /* 0xaa */
    uint8_t rear_guard_value;  /* 0xbb */
    uint8_t fill_alloc_value;  /* 0xeb */
    uint8_t fill_free_value;   /* 0xef */
};

/* Parses `options` into cfg (which it first sets to the defaults). Errors are logged with
 * hs_log, each starting with "<program>: ". Returns true when the whole string is valid;
 * on false cfg must not be used. Never allocates; `options` may be any NUL-terminated
 * string. */
bool hs_md_config_parse(struct hs_md_config *cfg, const char *options);

/* The two lines logged after a parse error, pointing to the option documentation. */
void hs_md_config_log_usage(void);

/* One row of the option table, for what must list the options without drifting from the
 * parser (the man page and shell completion tests). */
struct hs_md_option_doc {
    const char *name;
    const char *alias;   /* NULL when there is none */
    const char *value;   /* "none", "optional", "required" (numbers), "string" or "word" */
    size_t def;          /* the number an empty value means ("optional") */
    size_t min, max;     /* accepted numbers, inclusive ("optional", "required") */
    const char *def_str; /* the string an empty value means ("string", "word") */
    const char *const *words; /* the accepted words, NULL-terminated ("word"), else NULL */
};

/* Describes row i of the table into *doc; false when there is no row i. */
bool hs_md_option_describe(size_t i, struct hs_md_option_doc *doc);

#endif
