/* test_system_setting.c: malloc debug's system setting file (src/malloc_debug/
 * system_setting.h): its grammar, its errors, and reading it from disk (missing, too large,
 * unreadable). */
#include "check.h"
#include "system_setting.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct hs_md_setting s;
static char why[512];

static enum hs_md_setting_status parse(const char *text)
{
    size_t len = strlen(text);
    memcpy(s.text, text, len);
    why[0] = '\0';
    return hs_md_setting_parse(&s, len, "F", why, sizeof(why));
}

static void test_grammar(void)
{
    check_context("names, values, blanks, comments");
    CHECK_EQ(parse("# comment\n\n  LIBC_DEBUG_MALLOC_OPTIONS = guard  backtrace \t\r\n"
                   "\tLIBC_DEBUG_MALLOC_PROGRAM=ls\nHEAPSCOPE_LOG_FILE=/var/log/md.%p.log"),
             HS_MD_SETTING_OK);
    CHECK_STREQ(s.options, "guard  backtrace");
    CHECK_STREQ(s.program, "ls");
    CHECK_STREQ(s.log_file, "/var/log/md.%p.log"); /* no final newline */

    check_context("an empty value is no value; an empty file sets nothing");
    CHECK_EQ(parse("LIBC_DEBUG_MALLOC_OPTIONS=\nLIBC_DEBUG_MALLOC_PROGRAM=  \n"), HS_MD_SETTING_OK);
    CHECK(s.options == NULL && s.program == NULL && s.log_file == NULL);
    CHECK_EQ(parse(""), HS_MD_SETTING_OK);
    CHECK(s.options == NULL);

    check_context("'=' inside a value");
    CHECK_EQ(parse("LIBC_DEBUG_MALLOC_OPTIONS=backtrace=8 backtrace_dump_prefix=/tmp/x\n"),
             HS_MD_SETTING_OK);
    CHECK_STREQ(s.options, "backtrace=8 backtrace_dump_prefix=/tmp/x");
}

static void test_errors(void)
{
    check_context("unknown name");
    CHECK_EQ(parse("LIBC_DEBUG_MALLOC_OPTIONS=guard\nlibc.debug.malloc.options=guard\n"),
             HS_MD_SETTING_BAD);
    CHECK_STREQ(why, "F:2: unknown name 'libc.debug.malloc.options' (known: "
                     "LIBC_DEBUG_MALLOC_OPTIONS, LIBC_DEBUG_MALLOC_PROGRAM, HEAPSCOPE_LOG_FILE)");
    check_context("a line without '='");
    CHECK_EQ(parse("# x\nguard fill\n"), HS_MD_SETTING_BAD);
    CHECK_STREQ(why, "F:2: expected NAME=VALUE, got 'guard fill'");
    check_context("a name twice");
    CHECK_EQ(parse("HEAPSCOPE_LOG_FILE=/a\nHEAPSCOPE_LOG_FILE=/b\n"), HS_MD_SETTING_BAD);
    CHECK_STREQ(why, "F:2: HEAPSCOPE_LOG_FILE is set twice");
    check_context("a program name longer than the shim's buffer");
    char text[400];
    memset(text, 'p', sizeof(text));
    memcpy(text, "LIBC_DEBUG_MALLOC_PROGRAM=", 26);
    text[26 + 256] = '\0';
    CHECK_EQ(parse(text), HS_MD_SETTING_BAD);
    CHECK_STREQ(why, "F:1: LIBC_DEBUG_MALLOC_PROGRAM is longer than 255 bytes");
    text[26 + 255] = '\0';
    CHECK_EQ(parse(text), HS_MD_SETTING_OK);
    check_context("a NUL byte");
    memcpy(s.text, "A\0B", 3);
    CHECK_EQ(hs_md_setting_parse(&s, 3, "F", why, sizeof(why)), HS_MD_SETTING_BAD);
    CHECK_STREQ(why, "F: not a text file (it holds a NUL byte)");
}

static void write_file(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    close(fd);
}

static void test_reading(void)
{
    char dir[] = "/tmp/hs-setting-XXXXXX", path[64], big[HS_MD_SETTING_MAX + 2];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/conf", dir);

    check_context("no file, no directory: nothing set");
    CHECK_EQ(hs_md_setting_read(path, &s, why, sizeof(why)), HS_MD_SETTING_ABSENT);
    CHECK_EQ(hs_md_setting_read("/nonexistent-dir/x/conf", &s, why, sizeof(why)),
             HS_MD_SETTING_ABSENT);

    check_context("exactly the limit, and one byte more");
    memset(big, '#', sizeof(big));
    memcpy(big, "LIBC_DEBUG_MALLOC_OPTIONS=guard\n", 32);
    write_file(path, big, HS_MD_SETTING_MAX);
    CHECK_EQ(hs_md_setting_read(path, &s, why, sizeof(why)), HS_MD_SETTING_OK);
    CHECK_STREQ(s.options, "guard");
    write_file(path, big, HS_MD_SETTING_MAX + 1);
    CHECK_EQ(hs_md_setting_read(path, &s, why, sizeof(why)), HS_MD_SETTING_BAD);
    char want[128];
    snprintf(want, sizeof(want), "%s is larger than 8192 bytes", path);
    CHECK_STREQ(why, want);

    check_context("a directory where the file should be");
    unlink(path);
    CHECK(mkdir(path, 0755) == 0);
    CHECK_EQ(hs_md_setting_read(path, &s, why, sizeof(why)), HS_MD_SETTING_BAD);
    snprintf(want, sizeof(want), "cannot read %s: Is a directory", path);
    CHECK_STREQ(why, want);
    rmdir(path);
    rmdir(dir);
}

int main(void)
{
    test_grammar();
    test_errors();
    test_reading();
    return check_report();
}
