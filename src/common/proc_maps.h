/* proc_maps.h: allocation-free reader of /proc/<pid>/maps.
 *
 * Used by backtrace printing inside malloc, and by the leak detector and the profiler
 * daemon. Nothing here allocates or uses stdio: the file is read with open/read/close into a
 * fixed stack buffer and fed through a streaming parser, character by character, so a line
 * split across read() chunks, or longer than any buffer, parses the same as any other line.
 *
 * Line format (see proc(5)):
 *     start-end perms offset major:minor inode [path]
 * The path is everything after the inode and the padding spaces up to the newline; it may
 * contain spaces, and is empty for anonymous mappings. The kernel escapes '\n' in names, so a
 * newline always ends a line. A trailing " (deleted)" is removed from the path and reported in
 * hs_map.deleted. Pseudo paths ("[stack]", "[heap]", "[vdso]", "[anon:...]") are kept as is.
 * Paths longer than PATH_MAX - 1 are truncated. Malformed lines are skipped.
 *
 * Each entry also carries load_base: start - offset of the first mapping of the run of
 * mappings of the same file (same dev and inode, an offset-0 mapping starting a new run) that
 * the entry belongs to. For a loaded ELF object whose first PT_LOAD is at file offset 0 this is
 * the address its ELF header is mapped at (the load bias for PIE executables and DSOs).
 * Entries without an inode (anonymous, pseudo) get start - offset.
 *
 * Threading and signals: no global state; every function is reentrant and async-signal-safe
 * (open, read, close only). Stack use: hs_maps_foreach ~5.5 KiB (one struct hs_map plus a
 * 1 KiB read buffer), hs_maps_find ~1.2 KiB (it parses into the caller's struct).
 */
#ifndef HEAPSCOPE_COMMON_PROC_MAPS_H
#define HEAPSCOPE_COMMON_PROC_MAPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bits of hs_map.perms. HS_MAP_PRIVATE is the 'p' flag; clear means shared ('s'). */
enum {
    HS_MAP_READ = 1u << 0,
    HS_MAP_WRITE = 1u << 1,
    HS_MAP_EXEC = 1u << 2,
    HS_MAP_PRIVATE = 1u << 3,
};

struct hs_map {
    uintptr_t start;     /* first byte */
    uintptr_t end;       /* one past the last byte */
    uint64_t offset;     /* file offset mapped at start */
    unsigned perms;      /* HS_MAP_* */
    dev_t dev;           /* makedev(major, minor) of the device holding the file */
    uint64_t inode;      /* 0 for anonymous and pseudo mappings */
    uintptr_t load_base; /* see the header comment */
    bool deleted;        /* the kernel marked the path " (deleted)" (suffix removed) */
    char path[PATH_MAX]; /* "" when anonymous */
};

/* Called for each entry, in file order. Return 0 to continue; any other value stops the
 * iteration and is returned by the iterator (use positive values: -1 is the error value). */
typedef int (*hs_maps_fn)(const struct hs_map *m, void *arg);

/* Iterates over /proc/<pid>/maps (pid 0: this process). Returns 0 after the last entry, the
 * callback's value if it stopped early, or -1 with errno set if the file could not be opened
 * or read (entries before a read error have been delivered). */
int hs_maps_foreach(pid_t pid, hs_maps_fn fn, void *arg);

/* The same over an open descriptor positioned at the start of maps-formatted text (the caller
 * keeps ownership of fd). */
int hs_maps_foreach_fd(int fd, hs_maps_fn fn, void *arg);

/* Finds the mapping of /proc/<pid>/maps (pid 0: this process) containing addr and stores it,
 * with its load_base, in *out. Returns false if no mapping contains addr or the file could not
 * be read; *out is then unspecified. */
bool hs_maps_find(pid_t pid, uintptr_t addr, struct hs_map *out);

/* The streaming parser behind the functions above, public for callers that get maps text from
 * elsewhere (a socket, a buffer) and for tests. Usage:
 *     hs_maps_parser_init(&p, &scratch);
 *     r = hs_maps_parser_feed(&p, data, len, fn, arg);   ... any number of chunks ...
 *     if (r == 0) r = hs_maps_parser_finish(&p, fn, arg); (delivers a last unterminated line)
 * Entries are assembled in *scratch, which is what fn receives; fn may read it and may copy it,
 * and the parser overwrites it with the next line. feed returns 0, or the callback's non-zero
 * value, after which the parser must not be fed again without hs_maps_parser_init. */
struct hs_maps_parser {
    struct hs_map *m; /* entry being assembled */
    int state;
    unsigned digits; /* digits of the current number */
    uint64_t value;  /* current number */
    size_t path_len; /* characters of the path seen (may exceed what fits) */
    unsigned dev_major;
    /* Run of mappings of one file, for load_base. */
    bool run_valid;
    dev_t run_dev;
    uint64_t run_inode;
    uintptr_t run_base;
};

void hs_maps_parser_init(struct hs_maps_parser *p, struct hs_map *scratch);
int hs_maps_parser_feed(struct hs_maps_parser *p, const char *data, size_t len, hs_maps_fn fn,
                        void *arg);
int hs_maps_parser_finish(struct hs_maps_parser *p, hs_maps_fn fn, void *arg);

#endif
