/* profile_model.h: what `heapscope report` works on: symbolized stacks with values.
 *
 * A profile is a set of stacks (locations, innermost first) with four values each (in-use
 * bytes and count, allocated bytes and count) and, after a diff, the base profile's values.
 * Every distinct pc is a location, symbolized once into its chain of frames (inlined
 * functions first, the real function last). Stacks are keyed by what a person reads in the
 * report, not by addresses: each frame's function, source file name (without its directory)
 * and line. So two runs of a program (other load addresses) and two builds of it from other
 * directories (other source paths) compare.
 */
#ifndef HEAPSCOPE_REPORT_PROFILE_MODEL_H
#define HEAPSCOPE_REPORT_PROFILE_MODEL_H

#include "flamegraph.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_heap_dump;
struct hs_dump;

struct hs_rep_frame {
    const char *function; /* demangled name, or "0x<pc>" when unknown */
    const char *file;     /* source file ("" when unknown) */
    unsigned line;
    bool inlined; /* inlined into the next frame of the location */
};

/* An executable mapping of one input (a dump's MAPS line, a pprof profile's mapping). Each
 * input has its own, even when another input maps the same file at the same address: the same
 * address may hold other code in another run or build. */
struct hs_rep_mapping {
    uint64_t start, limit, offset;
    const char *path;
    const char *build_id; /* hex, "" when unknown */
};

#define HS_REP_NO_MAPPING SIZE_MAX

struct hs_rep_location {
    uint64_t pc;
    size_t mapping;  /* into hs_rep_profile.mappings, or HS_REP_NO_MAPPING */
    const char *map; /* path of the object the symbolizer found ("" when none) */
    uint64_t rel_pc;
    const char *build_id;
    size_t first_frame; /* into hs_rep_profile.frames */
    size_t num_frames;  /* >= 1 */
};

struct hs_rep_stack {
    size_t *locations; /* innermost first */
    size_t depth;
    int64_t values[HS_FG_VALUES];
    int64_t base[HS_FG_VALUES];
};

struct hs_rep_profile {
    struct hs_rep_frame *frames;
    size_t num_frames, cap_frames;
    struct hs_rep_location *locations;
    size_t num_locations, cap_locations;
    struct hs_rep_stack *stacks;
    size_t num_stacks, cap_stacks;
    struct hs_rep_mapping *mappings;
    size_t num_mappings, cap_mappings;
    int64_t totals[HS_FG_VALUES];
    int64_t base_totals[HS_FG_VALUES];
    bool has_alloc;
    bool diff;
    /* pprof's period type and period: "space" "bytes" 1 for a heap dump (every allocation),
     * a pprof input's own; the first input's type wins, the largest period of that type
     * (pprof merges so). NULL when no input had one. */
    const char *period_type, *period_unit;
    int64_t period;
    void *impl; /* hash tables, string pool */
};

/* Options of the symbolization. */
struct hs_rep_options {
    const char *symbols_dir; /* --symbols: look files up under this root first */
    bool progress;           /* report progress on stderr */
};

void hs_rep_profile_init(struct hs_rep_profile *p);
void hs_rep_profile_free(struct hs_rep_profile *p);

/* Out of memory: the functions below that can fail return -1 (NULL) with errno ENOMEM (and
 * err "out of memory"); the profile then holds what was added before, fit only for
 * hs_rep_profile_free. */

/* Adds a parsed heap dump (symbolizing it with its MAPS). Returns 0 or -1 with err. */
int hs_rep_add_dump(struct hs_rep_profile *p, const struct hs_dump *d,
                    const struct hs_rep_options *opt, char *err, size_t err_cap);

struct hs_pprof;

/* Adds a pprof heap profile (sample types inuse_space/objects, alloc_space/objects); its
 * unsymbolized locations are symbolized from the mappings' files when their build ids
 * agree. Returns 0 or -1 with err. */
int hs_rep_add_pprof(struct hs_rep_profile *p, const struct hs_pprof *pp,
                     const struct hs_rep_options *opt, char *err, size_t err_cap);

/* Makes p the difference "p - base": every stack of either gets base values; the base's
 * stacks that p lacks bring their locations and mappings along. Returns 0, or -1 (ENOMEM). */
int hs_rep_diff(struct hs_rep_profile *p, const struct hs_rep_profile *base);

/* "function (file:line)" display name of a frame, in a static-lifetime pool of p; NULL
 * (ENOMEM) when memory ran out. */
const char *hs_rep_frame_label(struct hs_rep_profile *p, const struct hs_rep_frame *f);

#endif
