/* md_option_table.c: prints malloc debug's option table, one row per line, for the tests that
 * keep the man page and the shell completion in step with the parser.
 *
 * Columns, tab-separated: name, alias ("-" when none), value kind (none, optional, required,
 * string, word), default, min, max (numbers; SIZE_MAX spelled so), default string or word
 * ("-" when none), the accepted words joined by '|' ("-" when not a word option).
 */
#include "options.h"

#include <stdint.h>
#include <stdio.h>

static void print_number(size_t n)
{
    if (n == SIZE_MAX)
        fputs("\tSIZE_MAX", stdout);
    else
        printf("\t%zu", n);
}

int main(void)
{
    struct hs_md_option_doc doc;
    for (size_t i = 0; hs_md_option_describe(i, &doc); i++) {
        printf("%s\t%s\t%s", doc.name, doc.alias ? doc.alias : "-", doc.value);
        print_number(doc.def);
        print_number(doc.min);
        print_number(doc.max);
        printf("\t%s\t", doc.def_str ? doc.def_str : "-");
        if (!doc.words)
            putchar('-');
        for (size_t w = 0; doc.words && doc.words[w]; w++)
            printf("%s%s", w ? "|" : "", doc.words[w]);
        putchar('\n');
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
