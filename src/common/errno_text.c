/* errno_text.c: see errno_text.h. */
#define _GNU_SOURCE
#include "errno_text.h"

#include <string.h>

const char *hs_errno_text(int err)
{
    const char *text = strerrordesc_np(err);
    return text ? text : "Unknown error";
}
