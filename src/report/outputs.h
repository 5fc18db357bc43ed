/* outputs.h: the formats `heapscope report` writes from a profile. */
#ifndef HEAPSCOPE_REPORT_OUTPUTS_H
#define HEAPSCOPE_REPORT_OUTPUTS_H

#include "profile_model.h"

#include <stdio.h>

struct hs_rep_output_options {
    int value;          /* HS_FG_INUSE_BYTES ... HS_FG_ALLOC_COUNT: what to rank by */
    size_t top;         /* how many stacks and functions the text report lists */
    const char *title;  /* the input file names */
    const char *header; /* e.g. the dump's version and fingerprint */
};

/* Text: totals, top call stacks, top functions by self and by total value. */
int hs_rep_write_text(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o);

/* Folded stacks for flamegraph.pl: "root;...;leaf value"; a diff writes two columns,
 * "root;...;leaf before after" (difffolded.pl's format, which flamegraph.pl draws). */
int hs_rep_write_folded(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o);

/* The interactive HTML flame graph. */
int hs_rep_write_html(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o);

/* A gzipped pprof profile (inuse_objects/count, inuse_space/bytes, and the alloc_* pair when
 * known, the one of o->value the default; a diff writes the deltas, as pprof's -diff_base
 * does). */
int hs_rep_write_pprof(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o);

#endif
