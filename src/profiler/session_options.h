/* session_options.h: the options of a profiling session, in one table for the daemon
 * (heapprofd, which parses and applies them) and `heapscope profile` (which accepts the same
 * spellings for the rows marked in_profile, checks them with the same rules and words, and
 * forwards them to the daemon it starts). Both commands' --help lines for these options are
 * written from the table too, so the two cannot drift apart.
 *
 * Each command keeps its own options outside the table (heapprofd's --socket, --pid, --log;
 * heapscope profile's -p, -n, --duration, ...): they mean different things in the two.
 */
#ifndef HEAPSCOPE_PROFILER_SESSION_OPTIONS_H
#define HEAPSCOPE_PROFILER_SESSION_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum hs_sopt_id {
    HS_SOPT_INTERVAL,
    HS_SOPT_CONTINUOUS,
    HS_SOPT_DUMP_AT_MAX,
    HS_SOPT_ANDROID_DUMP,
    HS_SOPT_NO_BLOCK,
    HS_SOPT_BLOCK_TIMEOUT,
    HS_SOPT_NO_ADAPTIVE,
    HS_SOPT_MAX_INTERVAL,
    HS_SOPT_BUFFER_SIZE,
    HS_SOPT_MAX_STACK,
    HS_SOPT_MAX_MEMORY,
    HS_SOPT_MAX_CPU,
    HS_SOPT_MAX_RATE,
    HS_SOPT_COUNT
};

struct hs_sopt {
    const char *name;  /* the long option, dashes included ("--interval") */
    char short_name;   /* its one-letter form, or 0 */
    const char *arg;   /* the value's name in --help ("BYTES"), NULL for a flag */
    uint64_t min, max; /* accepted values (a value option) */
    bool power_of_two; /* and a power of two */
    bool in_profile;   /* `heapscope profile` takes it too and forwards it */
    const char *help;  /* --help text; '\n' starts a continuation line */
    const char *takes; /* the error's end: "<name> takes <takes>" */
};

extern const struct hs_sopt hs_sopts[HS_SOPT_COUNT];

/* getopt_long's val for the table's options without a short form: HS_SOPT_VAL + id. Keep a
 * command's own option values below it. */
#define HS_SOPT_VAL 0x1000

/* Appends the table's rows (only those of `heapscope profile` when for_profile) to a
 * getopt_long table at out (room for HS_SOPT_COUNT entries); returns how many. A row with a
 * short form gets the letter as val, the others HS_SOPT_VAL + id. */
int hs_sopt_longopts(struct option *out, bool for_profile);

/* The short option letters of those rows for getopt_long's optstring ("i:"). */
const char *hs_sopt_shortopts(bool for_profile);

/* The row getopt_long returned opt for (a letter or HS_SOPT_VAL + id), or -1. */
int hs_sopt_of(int opt, bool for_profile);

/* Parses a value of row id. True with *out set; false when it is not a number in the range
 * (or not a power of two): say "<name> takes <hs_sopts[id].takes>". */
bool hs_sopt_parse(int id, const char *value, uint64_t *out);

/* Writes the --help lines of the rows, the text starting at column `column`. */
void hs_sopt_help(FILE *out, bool for_profile, int column);

#endif
