/* debug_system.c: `heapscope debug --system enable|disable|status`, malloc debug for every
 * program a machine (or a container image: --root) starts, as Android's `setprop
 * libc.debug.malloc.options` does.
 *
 * Enabling writes the system setting (system_setting.h: the options, the program name, the
 * log file pattern) and then puts the shim first in /etc/ld.so.preload (preload_list.c), in
 * that order so that the first program loading the shim finds its setting; disabling takes
 * them away in the opposite order. Nothing is written before every value has been checked
 * (setting_values.c) and the library the line will name has been found where the line points
 * and seen to load (preload_library.c); each file is replaced whole (replace_file.c). Programs
 * already running keep what they started with.
 */
#include "cli.h"

#include "system_setting.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PRELOAD_LIST "/etc/ld.so.preload"

struct system_paths {
    char preload[PATH_MAX];     /* ld.so.preload under the root */
    char setting[PATH_MAX];     /* the setting under the root */
    char setting_dir[PATH_MAX]; /* its directory */
};

static int system_paths(const char *root, struct system_paths *p)
{
    if (hs_root_path(root, PRELOAD_LIST, p->preload, sizeof(p->preload)) != 0 ||
        hs_root_path(root, hs_md_setting_path, p->setting, sizeof(p->setting)) != 0) {
        fprintf(stderr, "heapscope debug: --root %s: path too long\n", root);
        return -1;
    }
    snprintf(p->setting_dir, sizeof(p->setting_dir), "%.*s",
             (int)(strrchr(p->setting, '/') - p->setting), p->setting);
    return 0;
}

/* The setting file's text. */
static void setting_text(const struct hs_debug_setting *s, char *out, size_t cap)
{
    int n = snprintf(out, cap,
                     "# malloc debug's system setting, written by 'heapscope debug --system "
                     "enable'\n"
                     "# (docs/malloc_debug.md, \"Services and whole machines\"); 'heapscope "
                     "debug --system disable'\n"
                     "# removes it. The environment's LIBC_DEBUG_MALLOC_OPTIONS, when set, "
                     "wins over it.\n"
                     "LIBC_DEBUG_MALLOC_OPTIONS=%s\n",
                     s->options);
    if (s->program && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "LIBC_DEBUG_MALLOC_PROGRAM=%s\n", s->program);
    if (s->log_file && n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, "HEAPSCOPE_LOG_FILE=%s\n", s->log_file);
}

/* What the shim will read back from text equals what was asked for (blanks at the ends of
 * the options are dropped, which changes nothing). */
static bool reads_back(const struct hs_debug_setting *s, const char *text, size_t len)
{
    static struct hs_md_setting parsed;
    char why[512];
    if (len > HS_MD_SETTING_MAX) {
        fprintf(stderr, "heapscope debug: the setting would be larger than %d bytes\n",
                HS_MD_SETTING_MAX);
        return false;
    }
    memcpy(parsed.text, text, len);
    if (hs_md_setting_parse(&parsed, len, "setting", why, sizeof(why)) != HS_MD_SETTING_OK) {
        fprintf(stderr, "heapscope debug: %s\n", why);
        return false;
    }
    bool same = (s->program == NULL) == (parsed.program == NULL) &&
                (!s->program || strcmp(s->program, parsed.program) == 0) &&
                (s->log_file == NULL) == (parsed.log_file == NULL) &&
                (!s->log_file || strcmp(s->log_file, parsed.log_file) == 0);
    if (!same)
        fprintf(stderr, "heapscope debug: the program name or the log file pattern cannot be "
                        "written in the setting as given\n");
    return same;
}

static int enable(const struct hs_debug_setting *s, const struct system_paths *p)
{
    char lib[PATH_MAX];
    int rc = hs_debug_prepare_shim(s, lib);
    if (rc != 0)
        return rc;
    static char text[HS_MD_SETTING_MAX * 2];
    setting_text(s, text, sizeof(text));
    if (!reads_back(s, text, strlen(text)))
        return 2;
    if (hs_make_directories("debug", p->setting_dir, 0755) != 0 ||
        hs_replace_file("debug", p->setting, text, strlen(text), 0644) != 0 ||
        hs_preload_list_add("debug", p->preload, lib) != 0)
        return 1;
    fprintf(stderr,
            "heapscope debug: malloc debug is on for %s%s started from now on, with \"%s\"\n"
            "heapscope debug: %s lists %s; the setting is %s\n"
            "heapscope debug: reports go to %s; running programs are not affected until they "
            "restart; 'heapscope debug --system disable' turns it off\n",
            s->program ? "the programs named " : "every program", s->program ? s->program : "",
            s->options, p->preload, lib, p->setting,
            s->log_file ? s->log_file : "each program's stderr (no --log)");
    return 0;
}

static int disable(const struct hs_debug_setting *s, const struct system_paths *p)
{
    bool removed;
    if (hs_preload_list_remove("debug", p->preload, HS_MD_SHIM_NAME, &removed) != 0)
        return 1;
    bool had_setting = access(p->setting, F_OK) == 0;
    if (hs_remove_file("debug", p->setting) != 0)
        return 1;
    /* Its directory too, when nothing else is in it (it was made for the setting). */
    if (had_setting && rmdir(p->setting_dir) != 0 && errno != ENOTEMPTY && errno != EEXIST &&
        errno != ENOENT && errno != EBUSY)
        fprintf(stderr, "heapscope debug: cannot remove %s: %s\n", p->setting_dir, strerror(errno));
    (void)s;
    if (!removed && !had_setting) {
        fprintf(stderr,
                "heapscope debug: malloc debug was not on for the whole system (%s has "
                "no %s line, %s does not exist)\n",
                p->preload, HS_MD_SHIM_NAME, p->setting);
        return 0;
    }
    fprintf(stderr,
            "heapscope debug: malloc debug is off for programs started from now on (%s%s%s); "
            "running programs keep it until they exit\n",
            removed ? "removed the line from " : "", removed ? p->preload : "",
            had_setting ? (removed ? " and the setting" : "removed the setting") : "");
    return 0;
}

static int status(const struct hs_debug_setting *s, const struct system_paths *p)
{
    char lib[PATH_MAX], why[512];
    bool listed = hs_preload_list_find(p->preload, HS_MD_SHIM_NAME, lib, sizeof(lib));
    static struct hs_md_setting setting;
    enum hs_md_setting_status st = hs_md_setting_read(p->setting, &setting, why, sizeof(why));
    bool on = listed && st == HS_MD_SETTING_OK && setting.options;
    printf("malloc debug for the whole system: %s\n", on ? "on"
                                                      : !listed && st == HS_MD_SETTING_ABSENT
                                                          ? "off"
                                                          : "incomplete (see below)");
    char in_root[PATH_MAX];
    if (listed)
        printf("  %s: %s%s\n", p->preload, lib,
               hs_root_path(s->root, lib, in_root, sizeof(in_root)) == 0 &&
                       access(in_root, R_OK) != 0
                   ? " (missing: every program will say that it cannot preload it)"
                   : "");
    else
        printf("  %s: no %s line\n", p->preload, HS_MD_SHIM_NAME);
    if (st == HS_MD_SETTING_ABSENT) {
        printf("  %s: none\n", p->setting);
    } else if (st == HS_MD_SETTING_BAD) {
        printf("  %s: unusable (programs run without malloc debug): %s\n", p->setting, why);
    } else {
        printf("  %s:\n", p->setting);
        printf("    options: %s\n", setting.options ? setting.options : "(none: stays off)");
        printf("    program: %s\n", setting.program ? setting.program : "(every program)");
        printf("    log:     %s\n",
               setting.log_file ? setting.log_file : "(each program's stderr)");
    }
    return 0;
}

int hs_debug_system(const char *action, const struct hs_debug_setting *s)
{
    struct system_paths p;
    if (system_paths(s->root, &p) != 0)
        return 2;
    if (strcmp(action, "enable") == 0)
        return enable(s, &p);
    if (s->options || s->program || s->log_file) {
        fprintf(stderr, "heapscope debug: -o, --program and --log go with --system enable\n");
        return 2;
    }
    if (strcmp(action, "disable") == 0)
        return disable(s, &p);
    if (strcmp(action, "status") == 0)
        return status(s, &p);
    fprintf(stderr, "heapscope debug: --system takes enable, disable or status, not '%s'\n",
            action);
    return 2;
}
