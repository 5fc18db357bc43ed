/* suppressions.h: suppression rules, as LeakSanitizer reads them, shared by the heapscope
 * command and the shim (the malloc debug option suppressions=FILE).
 *
 * A suppressions file holds one rule per line, "leak:PATTERN" (leaks: leak_track, the
 * memunreachable reports, `heapscope leaks`) or "error:PATTERN" (malloc debug's error
 * reports); "#" starts a comment line; blank lines and the spaces around a rule are ignored.
 * A PATTERN is matched against the names of a finding's frames (function, source file,
 * library path) anywhere inside them, with "*" matching any run of characters; a leading "^"
 * or a trailing "$" anchors it to the start or end of the name (LeakSanitizer's rules).
 *
 * Memory: the parser takes its storage from a caller's allocator (malloc in the command, the
 * private arena in the shim); the matcher allocates nothing and is async-signal-safe.
 */
#ifndef HEAPSCOPE_COMMON_SUPPRESSIONS_H
#define HEAPSCOPE_COMMON_SUPPRESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hs_supp_kind { HS_SUPP_LEAK, HS_SUPP_ERROR };

struct hs_supp_rule {
    enum hs_supp_kind kind;
    const char *pattern; /* NUL-terminated, inside the set's storage */
    unsigned line;       /* in the file, for the summary */
    /* What it suppressed so far (updated atomically: several threads of the shim report). */
    uint64_t hits, bytes;
};

struct hs_supp_set {
    struct hs_supp_rule *rules;
    size_t count;
    char *text; /* the patterns' storage */
};

/* The caller's allocator: returns zeroed or uninitialised memory of size bytes, or NULL. */
typedef void *(*hs_supp_alloc_fn)(size_t size, void *ctx);

/* Parses a suppressions file's text (len bytes, need not end in a newline) into set.
 * Returns true, or false with err ("FILE:LINE: ..." is the caller's; err gets "LINE: what is
 * wrong") for a line that is not a rule or a comment, or when memory runs out. */
bool hs_supp_parse(const char *text, size_t len, struct hs_supp_set *set, hs_supp_alloc_fn alloc,
                   void *ctx, char *err, size_t err_cap);

/* Whether pattern (with "*", "^", "$" as above) matches somewhere in name. */
bool hs_supp_pattern_matches(const char *pattern, const char *name);

/* The first rule of this kind whose pattern matches one of the n names (NULL entries and
 * empty names are skipped), or NULL. */
struct hs_supp_rule *hs_supp_match(struct hs_supp_set *set, enum hs_supp_kind kind,
                                   const char *const *names, size_t n);

/* Counts one finding of `bytes` bytes against rule (thread-safe). */
void hs_supp_count(struct hs_supp_rule *rule, uint64_t bytes);

/* "leak" or "error". */
const char *hs_supp_kind_name(enum hs_supp_kind kind);

#endif
