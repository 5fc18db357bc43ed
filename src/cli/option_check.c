/* option_check.c: checking malloc debug options in the CLI, with the shim's own parser, so a
 * typo stops the command before the program runs. */
#include "cli.h"

#include "log.h"

#include <stdio.h>
#include <string.h>

static const char *g_command;

/* Prints a parser message without the log prefix: here it is the command's own error. */
static void print_parse_message(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    const char *body = strstr(line, "]");
    body = body ? strstr(body, ": ") : NULL;
    if (body) {
        body += 2;
        len -= (size_t)(body - line);
        line = body;
    }
    fprintf(stderr, "heapscope %s: %.*s", g_command, (int)len, line);
}

bool hs_cli_parse_options(const char *command, const char *program, const char *options,
                          struct hs_md_config *cfg)
{
    g_command = command;
    hs_log_set_program_name(program);
    hs_log_set_sink(print_parse_message, NULL);
    bool valid = hs_md_config_parse(cfg, options);
    hs_log_set_sink(NULL, NULL);
    return valid;
}
