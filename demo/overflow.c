/* overflow.c: the demo's buggy program. It copies a name into a buffer one byte too small
 * (the classic strcpy off-by-one: the terminating NUL lands past the end), then frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *copy_name(const char *name)
{
    char *copy = malloc(strlen(name)); /* bug: no room for the '\0' */
    strcpy(copy, name);
    return copy;
}

int main(void)
{
    char *name = copy_name("heapscope demo");
    printf("hello from %s\n", name);
    free(name);
    return 0;
}
