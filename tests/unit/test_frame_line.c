/* test_frame_line.c: Android frame lines taken apart (src/common/frame_line.c). */
#include "check.h"
#include "frame_line.h"

#include <string.h>

static bool parse(const char *body, struct hs_frame_line *fl)
{
    return hs_frame_line_parse(body, strlen(body), fl);
}

static bool span_is(const char *p, size_t n, const char *want)
{
    return p && strlen(want) == n && memcmp(p, want, n) == 0;
}

int main(void)
{
    struct hs_frame_line fl;

    check_context("named frame");
    CHECK(parse("          #00  pc 00000000000011f7  /home/me/overflow (main+65)", &fl));
    CHECK_EQ(fl.index, 0);
    CHECK_EQ(fl.rel_pc, 0x11f7);
    CHECK(span_is(fl.path, fl.path_len, "/home/me/overflow"));
    CHECK(span_is(fl.function, fl.function_len, "main"));
    CHECK(!fl.deleted);
    CHECK_EQ(fl.indent, 10);

    check_context("no function");
    CHECK(parse("          #12  pc 0000000000027249  /usr/lib/x86_64-linux-gnu/libc.so.6", &fl));
    CHECK_EQ(fl.index, 12);
    CHECK(fl.function == NULL);
    CHECK(span_is(fl.path, fl.path_len, "/usr/lib/x86_64-linux-gnu/libc.so.6"));

    check_context("deleted, with and without a function");
    CHECK(parse("          #01  pc 0000000000001000  /tmp/a.out (deleted) (f+1)", &fl));
    CHECK(fl.deleted);
    CHECK(span_is(fl.path, fl.path_len, "/tmp/a.out"));
    CHECK(span_is(fl.function, fl.function_len, "f"));
    CHECK(parse("          #01  pc 0000000000001000  /tmp/a.out (deleted)", &fl));
    CHECK(fl.deleted);
    CHECK(fl.function == NULL);
    CHECK(span_is(fl.path, fl.path_len, "/tmp/a.out"));

    check_context("a path with spaces and parentheses; C++ names");
    CHECK(parse("          #02  pc 00000000000a0000  /opt/my app (x64)/lib.so "
                "(_ZN3foo3barEv+1234)",
                &fl));
    CHECK(span_is(fl.path, fl.path_len, "/opt/my app (x64)/lib.so"));
    CHECK(span_is(fl.function, fl.function_len, "_ZN3foo3barEv"));

    check_context("unknown and vdso");
    CHECK(parse("          #03  pc 00007ffd12345678  <unknown>", &fl));
    CHECK(span_is(fl.path, fl.path_len, "<unknown>"));
    CHECK(parse("          #04  pc 0000000000000b5d  [vdso] (__vdso_clock_gettime+13)", &fl));
    CHECK(span_is(fl.path, fl.path_len, "[vdso]"));

    check_context("not frame lines");
    CHECK(!parse("Backtrace at time of failure:", &fl));
    CHECK(!parse("#00  pc 00000000000011f7  /a (main+1)", &fl)); /* no indent */
    CHECK(!parse("          #0  pc 00000000000011f7  /a", &fl)); /* one digit */
    CHECK(!parse("          #00  pc zz  /a", &fl));
    CHECK(!parse("          #00  pc 00000000000011f7", &fl)); /* no path */
    CHECK(!parse("          #00  pc 00000000000011f7  ", &fl));
    CHECK(!parse("", &fl));
    return check_report();
}
