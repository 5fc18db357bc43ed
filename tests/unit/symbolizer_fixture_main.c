/* symbolizer_fixture_main.c: executable around the symbolizer test fixture.
 *
 * Runs symfix_run() and prints "key hex-or-decimal" lines (the fixture's pcs and lines, and
 * "bias": the executable's load bias from dl_iterate_phdr). Then, without arguments, prints
 * "MAPS" and a copy of /proc/self/maps and exits; with "wait", prints "READY" and waits for
 * end of input on stdin, so that the parent can read /proc/<pid>/maps itself.
 */
#define _GNU_SOURCE
#include "symbolizer_fixture.h"

#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static int first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uintptr_t *)arg = (uintptr_t)info->dlpi_addr;
    return 1; /* the main program comes first */
}

int main(int argc, char **argv)
{
    symfix_run();
    uintptr_t bias = 0;
    dl_iterate_phdr(first_object, &bias);
    printf("bias %" PRIxPTR "\n", bias);
    printf("pc_static %" PRIxPTR "\n", symfix_pc_static);
    printf("pc_inner %" PRIxPTR "\n", symfix_pc_inner);
    printf("pc_run %" PRIxPTR "\n", symfix_pc_run);
    printf("addr_static %" PRIxPTR "\n", symfix_addr_static);
    printf("addr_outer %" PRIxPTR "\n", symfix_addr_outer);
    printf("line_static %d\n", symfix_line_static);
    printf("line_inner %d\n", symfix_line_inner);
    printf("line_call_inner %d\n", symfix_line_call_inner);
    printf("line_call_middle %d\n", symfix_line_call_middle);
    printf("line_run %d\n", symfix_line_run);
    printf("pc_mangled %" PRIxPTR "\n", symfix_pc_mangled);
    printf("line_mangled %d\n", symfix_line_mangled);
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        printf("READY\n");
        fflush(stdout);
        while (getchar() != EOF) {
        }
        return 0;
    }
    printf("MAPS\n");
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return 1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), maps)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(maps);
    return 0;
}
