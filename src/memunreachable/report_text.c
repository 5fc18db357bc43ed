/* report_text.c: see report_text.h. Lines are built with hs_format in stack buffers. */
#include "report_text.h"

#include "backtrace.h"
#include "format.h"

#include <stdarg.h>
#include <stdint.h>

#define LINE_MAX_LEN 256

const char *hs_mu_abi_name(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__i386__)
    return "x86";
#elif defined(__arm__)
    return "arm";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#else
    return "unknown";
#endif
}

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

static void emit_f(hs_mu_emit_fn emit, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void emit_f(hs_mu_emit_fn emit, void *ctx, const char *fmt, ...)
{
    char line[LINE_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    size_t n = hs_vformat(line, sizeof(line), fmt, ap);
    va_end(ap);
    emit(line, n, ctx);
}

static void emit_contents(const struct UnreachableLeak *leak, hs_mu_emit_fn emit, void *ctx)
{
    static const char hex[] = "0123456789abcdef";
    size_t bytes = leak->contents_length;
    if (bytes > UNREACHABLE_CONTENTS_LENGTH)
        bytes = UNREACHABLE_CONTENTS_LENGTH;
    if (bytes > leak->size)
        bytes = leak->size;
    if (bytes == leak->size)
        emit_f(emit, ctx, "   contents:");
    else
        emit_f(emit, ctx, "   first %zu bytes of contents:", bytes);
    for (size_t i = 0; i < bytes; i += 16) {
        char line[LINE_MAX_LEN];
        size_t n = hs_format(line, sizeof(line), "   %lx: ", (unsigned long)(leak->begin + i));
        size_t end = i + 16 < bytes ? i + 16 : bytes;
        for (size_t j = i; j < i + 16; j++) {
            if (j < end) {
                line[n++] = hex[leak->contents[j] >> 4];
                line[n++] = hex[leak->contents[j] & 15];
                line[n++] = ' ';
            } else {
                line[n++] = ' ';
                line[n++] = ' ';
                line[n++] = ' ';
            }
        }
        for (size_t j = i; j < end; j++) {
            uint8_t c = leak->contents[j];
            line[n++] = c >= 0x20 && c <= 0x7e ? (char)c : '.';
        }
        line[n] = '\0';
        emit(line, n, ctx);
    }
}

void hs_mu_report_leak(const struct UnreachableLeak *leak, bool log_contents, hs_mu_emit_fn emit,
                       void *ctx)
{
    emit_f(emit, ctx, "  %zu bytes unreachable at %lx", leak->size, (unsigned long)leak->begin);
    if (leak->referenced_count > 0)
        emit_f(emit, ctx, "   referencing %zu unreachable bytes in %zu allocation%s",
               leak->referenced_size, leak->referenced_count, plural(leak->referenced_count));
    if (leak->similar_count > 0) {
        emit_f(emit, ctx, "   and %zu similar unreachable bytes in %zu allocation%s",
               leak->similar_size, leak->similar_count, plural(leak->similar_count));
        if (leak->similar_referenced_count > 0)
            emit_f(emit, ctx, "   referencing %zu unreachable bytes in %zu allocation%s",
                   leak->similar_referenced_size, leak->similar_referenced_count,
                   plural(leak->similar_referenced_count));
    }
    if (log_contents)
        emit_contents(leak, emit, ctx);
    size_t nf = leak->num_backtrace_frames;
    if (nf > UNREACHABLE_BACKTRACE_FRAMES)
        nf = UNREACHABLE_BACKTRACE_FRAMES;
    if (nf > 0)
        hs_backtrace_format(leak->backtrace_frames, nf, emit, ctx);
}

void hs_mu_report_text(const struct UnreachableMemoryInfo *info, bool log_contents,
                       hs_mu_emit_fn emit, void *ctx)
{
    hs_mu_report_text_note(info, log_contents, NULL, emit, ctx);
}

void hs_mu_report_text_note(const struct UnreachableMemoryInfo *info, bool log_contents,
                            const char *note, hs_mu_emit_fn emit, void *ctx)
{
    emit_f(emit, ctx, "  %zu bytes in %zu unreachable allocation%s", info->leak_bytes,
           info->num_leaks, plural(info->num_leaks));
    emit_f(emit, ctx, "  ABI: '%s'", hs_mu_abi_name());
    if (note)
        emit_f(emit, ctx, "  %s", note);
    emit("", 0, ctx);
    for (size_t i = 0; i < info->num_reported_leaks && info->leaks; i++) {
        hs_mu_report_leak(&info->leaks[i], log_contents, emit, ctx);
        emit("", 0, ctx);
    }
}

size_t hs_mu_summary_line(const struct UnreachableMemoryInfo *info, char *buf, size_t cap)
{
    return hs_format(buf, cap,
                     "%zu bytes in %zu allocation%s unreachable out of %zu bytes in %zu "
                     "allocation%s",
                     info->leak_bytes, info->num_leaks, plural(info->num_leaks),
                     info->allocation_bytes, info->num_allocations, plural(info->num_allocations));
}
