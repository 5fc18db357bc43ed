/* flamegraph.h: the self-contained interactive HTML flame graph of `heapscope report`.
 *
 * Input: folded stacks (root frame first) with up to four values each (in-use bytes and
 * count, allocated bytes and count) and, for a diff, the same values of the base profile.
 * Output: one HTML file with its CSS, JavaScript and data inline (no network): click to zoom,
 * search, hover details, switch between bytes and counts and between in-use and allocated.
 */
#ifndef HEAPSCOPE_REPORT_FLAMEGRAPH_H
#define HEAPSCOPE_REPORT_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { HS_FG_INUSE_BYTES, HS_FG_INUSE_COUNT, HS_FG_ALLOC_BYTES, HS_FG_ALLOC_COUNT, HS_FG_VALUES };

struct hs_fg_stack {
    const char *const *frames; /* root first; each a display name, e.g. "main (prog.c:12)" */
    size_t depth;
    int64_t values[HS_FG_VALUES];
    int64_t base[HS_FG_VALUES]; /* diff only: the base profile's values for this stack */
};

struct hs_fg_input {
    const char *title;    /* e.g. the file name */
    const char *subtitle; /* e.g. totals, or "diff against BASE"; shown whole, its line
                           * breaks kept */
    const struct hs_fg_stack *stacks;
    size_t num_stacks;
    bool has_alloc; /* allocated values are meaningful (pprof profiles); else in-use only */
    bool diff;      /* show growth (value - base): red grew, blue shrank */
    int value;      /* HS_FG_*: what the page shows on opening (0: in-use bytes; an allocated
                     * kind without has_alloc falls back to it); the URL's value= overrides */
};

/* Writes the HTML page to out. Returns 0, or -1 with errno set on a write error (or ENOMEM).
 *
 * Input: frames must be non-NULL strings (NULL shows as "??"), any bytes (invalid UTF-8 shows
 * as U+FFFD); they, title and subtitle need only live during the call. Stacks with the same
 * frames are summed; negative values draw as nothing. Values are exact in the page up to 2^53.
 *
 * The page: root ("all") at the top, callees below. A frame's id is its index in the merged
 * call tree in preorder, siblings sorted by name (strcmp), the root being 0. The view lives in
 * the URL fragment, #zoom=ID&search=TEXT&value=KIND (KIND one of inuse_bytes, inuse_count,
 * alloc_bytes, alloc_count; search is a case-insensitive substring), applied on load and kept
 * up to date (value= only when it is not the kind the page opened on); scripts can drive it
 * through window.heapscopeFlame: zoomTo(id, or the list of names from the root's child down),
 * search(text), setValue(kind), state(), details(id). */
int hs_flamegraph_write_html(FILE *out, const struct hs_fg_input *in);

#endif
