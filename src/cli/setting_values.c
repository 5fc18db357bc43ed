/* setting_values.c: the values `heapscope debug --system enable` and `--unit` write into
 * system files (the options, the program name, the log file pattern), checked before
 * anything is written: a value the shim would refuse would otherwise reach every process of a
 * machine or a service, and a line break would split the file's line. Also the paths of
 * those files under another root (a container image; the tests). */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "system_setting.h"

int hs_root_path(const char *root, const char *path, char *out, size_t cap)
{
    size_t n = root ? strlen(root) : 0;
    while (n > 0 && root[n - 1] == '/')
        n--;
    int len = snprintf(out, cap, "%.*s%s", (int)n, n ? root : "", path);
    return len >= 0 && (size_t)len < cap ? 0 : -1;
}

static bool has_line_break(const char *what, const char *value)
{
    if (strpbrk(value, "\n\r") == NULL)
        return false;
    fprintf(stderr, "heapscope debug: the %s cannot hold a line break\n", what);
    return true;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\v';
}

static bool check_program(const char *program)
{
    size_t len = strlen(program);
    if (has_line_break("program name", program))
        return false;
    if (len == 0 || len > HS_MD_SETTING_PROGRAM_MAX || strchr(program, '/') || blank(program[0]) ||
        blank(program[len - 1])) {
        fprintf(stderr,
                "heapscope debug: --program takes a program name as the shim sees it (the last "
                "part of argv[0]: no '/', no blanks at its ends, at most %d bytes), not '%s'\n",
                HS_MD_SETTING_PROGRAM_MAX, program);
        return false;
    }
    return true;
}

static bool check_log(const char *root, const char *pattern)
{
    if (has_line_break("log file pattern", pattern))
        return false;
    size_t len = strlen(pattern);
    if (pattern[0] != '/' || len >= PATH_MAX || blank(pattern[len - 1])) {
        fprintf(stderr,
                "heapscope debug: --log takes an absolute path here (a service's or a "
                "program's working directory is anyone's guess), not '%s'\n",
                pattern);
        return false;
    }
    char dir[PATH_MAX], in_root[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(pattern, '/') - pattern), pattern);
    struct stat st;
    if (hs_root_path(root, dir[0] ? dir : "/", in_root, sizeof(in_root)) != 0 ||
        stat(in_root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "heapscope debug: the log file's directory %s does not exist; create it, "
                "writable by the users the programs run as (e.g. mkdir -m 1777 %s)\n",
                in_root, in_root);
        return false;
    }
    return true;
}

bool hs_debug_check_setting(const struct hs_debug_setting *s)
{
    if (!s->options) {
        fprintf(stderr, "heapscope debug: say which malloc debug options: -o OPTIONS\n");
        return false;
    }
    if (has_line_break("options", s->options))
        return false;
    if (s->program && !check_program(s->program))
        return false;
    if (s->log_file && !check_log(s->root, s->log_file))
        return false;
    struct hs_md_config cfg;
    if (!hs_cli_parse_options("debug", s->program ? s->program : "debug", s->options, &cfg))
        return false;
    if (cfg.options == 0) {
        fprintf(stderr, "heapscope debug: the options '%s' turn nothing on\n", s->options);
        return false;
    }
    return s->root != NULL || hs_check_shim_files("debug", &cfg, false);
}

int hs_debug_prepare_shim(const struct hs_debug_setting *s, char *lib)
{
    if (!hs_debug_check_setting(s))
        return 2;
    char lib_in_root[PATH_MAX];
    if (hs_find_library(HS_MD_SHIM_NAME, lib, PATH_MAX) != 0)
        return 1;
    if (hs_root_path(s->root, lib, lib_in_root, sizeof(lib_in_root)) != 0 ||
        !hs_check_preload_library("debug", lib_in_root, lib, s->root == NULL))
        return 1;
    return 0;
}
