/* symbol_binding.c: see symbol_binding.h. */
#define _GNU_SOURCE
#include "symbol_binding.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>

bool hs_symbol_binds_to(const char *name, const void *fn)
{
    void *found = dlsym(RTLD_DEFAULT, name);
    if (found == fn)
        return true;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    return found != NULL && dladdr1(found, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 &&
           sym != NULL && sym->st_shndx == SHN_UNDEF;
}
