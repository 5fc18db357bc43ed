/* symbolizer_fixture.h: what the symbolizer test fixture (symbolizer_fixture.c) records.
 *
 * symfix_run() calls a static function, a static function with two levels of always_inline
 * functions inlined into it, and records in each the return address of a call made there
 * (symfix_pc_*) and the source line of that call (symfix_line_*). The fixture is built as a
 * DSO and into executables whose debug info is split off into a separate file.
 */
#ifndef HEAPSCOPE_TESTS_SYMBOLIZER_FIXTURE_H
#define HEAPSCOPE_TESTS_SYMBOLIZER_FIXTURE_H

#include <stdint.h>

#define SYMFIX_API __attribute__((visibility("default")))

/* Return addresses of calls, and the lines of those calls. */
SYMFIX_API extern uintptr_t symfix_pc_static; /* in fix_static_fn */
SYMFIX_API extern int symfix_line_static;
SYMFIX_API extern uintptr_t symfix_pc_inner; /* in fix_inner, inlined in fix_middle */
SYMFIX_API extern int symfix_line_inner;
SYMFIX_API extern int symfix_line_call_inner;  /* in fix_middle: the call of fix_inner */
SYMFIX_API extern int symfix_line_call_middle; /* in fix_outer: the call of fix_middle */
SYMFIX_API extern uintptr_t symfix_pc_run;     /* in symfix_run itself */
SYMFIX_API extern int symfix_line_run;
SYMFIX_API extern uintptr_t symfix_pc_mangled; /* in fix_mangled, named _ZN6symfix7mangledEv */
SYMFIX_API extern int symfix_line_mangled;
/* Entry addresses of fix_static_fn and fix_outer (static functions). */
SYMFIX_API extern uintptr_t symfix_addr_static;
SYMFIX_API extern uintptr_t symfix_addr_outer;

SYMFIX_API void symfix_run(void);

#endif
