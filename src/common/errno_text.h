/* errno_text.h: the text of an errno value, safe inside malloc and signal handlers.
 * glibc's strerrordesc_np returns a constant, untranslated string; strerror may reach
 * gettext and allocate. */
#ifndef HEAPSCOPE_COMMON_ERRNO_TEXT_H
#define HEAPSCOPE_COMMON_ERRNO_TEXT_H

/* E.g. "Numerical result out of range"; "Unknown error" for a value glibc does not know. */
const char *hs_errno_text(int err);

#endif
