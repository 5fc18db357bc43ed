/* system_setting.h: malloc debug's system setting, Android's libc.debug.malloc.* properties.
 *
 * A small file (HS_MD_SETTING_PATH, /etc/heapscope/malloc_debug.conf unless the build names
 * another: the CMake cache variable HEAPSCOPE_MALLOC_DEBUG_SETTING) that the preloaded shim
 * reads when the environment has no LIBC_DEBUG_MALLOC_OPTIONS, so that processes nobody
 * starts by hand (services, workers whose environment was cleaned, every process of a machine
 * with the shim in /etc/ld.so.preload) run under malloc debug. `heapscope debug --system`
 * writes it. Lines:
 *
 *     # a comment
 *     LIBC_DEBUG_MALLOC_OPTIONS=backtrace leak_track
 *     LIBC_DEBUG_MALLOC_PROGRAM=myserver
 *     HEAPSCOPE_LOG_FILE=/var/log/heapscope/malloc_debug.%p.log
 *
 * Each value means what the environment variable of the same name means (same grammar, same
 * error messages: options.h); blanks around names and values are dropped, an empty value is
 * no value, a name given twice or an unknown name is an error, and so is a file larger than
 * HS_MD_SETTING_MAX bytes.
 *
 * Reading never allocates (open/read into the caller's struct) and is async-signal-safe: the
 * shim reads the file inside the first allocation of the process.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SYSTEM_SETTING_H
#define HEAPSCOPE_MALLOC_DEBUG_SYSTEM_SETTING_H

#include <stddef.h>

#define HS_MD_SETTING_MAX 8192        /* bytes of the file */
#define HS_MD_SETTING_PROGRAM_MAX 255 /* as LIBC_DEBUG_MALLOC_PROGRAM's buffer in init.c */

/* The build's path of the setting file. */
extern const char hs_md_setting_path[];

enum hs_md_setting_status {
    HS_MD_SETTING_ABSENT, /* no file (or no directory): nothing set */
    HS_MD_SETTING_OK,
    HS_MD_SETTING_BAD, /* unreadable, too large or malformed: `why` says which */
};

struct hs_md_setting {
    /* NULL when the file does not set them; else NUL-terminated values inside text. */
    const char *options;
    const char *program;
    const char *log_file;
    char text[HS_MD_SETTING_MAX + 1];
};

/* Reads and parses the setting file at path into *s. On HS_MD_SETTING_BAD, why holds one
 * line ("PATH:LINE: ..." or "cannot read PATH: REASON"). */
enum hs_md_setting_status hs_md_setting_read(const char *path, struct hs_md_setting *s, char *why,
                                             size_t cap);

/* Parses s->text (len bytes, a copy of a setting file named path in messages) in place. */
enum hs_md_setting_status hs_md_setting_parse(struct hs_md_setting *s, size_t len, const char *path,
                                              char *why, size_t cap);

#endif
