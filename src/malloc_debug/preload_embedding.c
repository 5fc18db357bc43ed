/* preload_embedding.c: libmalloc_debug.so is the preloaded shim: off without options. */
#include "embedding.h"

#include <stddef.h>

const struct hs_md_embedding hs_md_embedding = {false, NULL};
