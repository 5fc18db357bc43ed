/* symbolizer_fixture.c: functions at known lines for test_symbolizer (see
 * symbolizer_fixture.h). Built with -O2 -g; the static functions must keep their names (no
 * inlining, no cloning) and the always_inline ones must be inlined.
 */
#include "symbolizer_fixture.h"

#if defined(__clang__)
#define FIX_NOINLINE __attribute__((noinline, used))
#else
#define FIX_NOINLINE __attribute__((noinline, noipa, used))
#endif
#define FIX_INLINE static inline __attribute__((always_inline))

uintptr_t symfix_pc_static;
int symfix_line_static;
uintptr_t symfix_pc_inner;
int symfix_line_inner;
int symfix_line_call_inner;
int symfix_line_call_middle;
uintptr_t symfix_pc_run;
int symfix_line_run;
uintptr_t symfix_addr_static;
uintptr_t symfix_addr_outer;
uintptr_t symfix_pc_mangled;
int symfix_line_mangled;

/* Each marker line below ("line = __LINE__; pc = symfix_here();") must stay one line. */
/* clang-format off */

/* Returns its own return address: a pc at the call site, on the caller's line. */
FIX_NOINLINE uintptr_t symfix_here(void)
{
    return (uintptr_t)__builtin_return_address(0);
}

static FIX_NOINLINE void fix_static_fn(void)
{
    symfix_line_static = __LINE__; symfix_pc_static = symfix_here();
}

FIX_INLINE void fix_inner(int call_line)
{
    symfix_line_call_inner = call_line;
    symfix_line_inner = __LINE__; symfix_pc_inner = symfix_here();
}

FIX_INLINE void fix_middle(int call_line)
{
    symfix_line_call_middle = call_line;
    fix_inner(__LINE__);
}

static FIX_NOINLINE void fix_outer(void)
{
    fix_middle(__LINE__);
}

/* A C function under a C++ mangled name (symfix::mangled()), for demangling. */
static FIX_NOINLINE void fix_mangled(void) __asm__("_ZN6symfix7mangledEv");
static void fix_mangled(void)
{
    symfix_line_mangled = __LINE__; symfix_pc_mangled = symfix_here();
}

void symfix_run(void)
{
    symfix_addr_static = (uintptr_t)&fix_static_fn;
    symfix_addr_outer = (uintptr_t)&fix_outer;
    fix_static_fn();
    fix_outer();
    fix_mangled();
    symfix_line_run = __LINE__; symfix_pc_run = symfix_here();
}

/* clang-format on */
