/* stack_hints.h: the daemon's hints to the client on how much of a thread's stack its
 * samples need.
 *
 * A sample carries the stack from the stack pointer up to where the thread's frames end
 * (stack_copy.h). What the client can find on its own is an upper bound: on a thread that
 * glibc created, the top of the mapping holds the static TLS of every module and the TLS
 * surplus, a few KiB that no frame uses (2.6 KiB copied per sample of malloc_bench's worker,
 * of which its unwinder read 0.75 KiB). The daemon knows better after each sample: a complete
 * unwind read nothing above the outermost frame (hs_unwind_result.copy_used), and that frame
 * does not move while the thread lives. So it notes, per thread, the address above which the
 * last complete unwind read nothing, and the client copies up to that address instead.
 *
 * It also notes the largest parts of the thread's stack below that address that its complete
 * unwinds kept unread (stack_gap.h: the locals of big outer frames; profiled_process.c decides
 * which: from different stack pointers, under the same outer frames, for a while), at most
 * HS_STACK_GAPS of at least HS_STACK_GAP_MIN bytes, and the client leaves them out of its
 * copies too. A sample whose unwind needs a word of a part left out ends truncated, and the
 * daemon then notes no more gaps for that thread (hs_stack_hint_refuse_gaps): the samples the
 * thread takes until the daemon has read that one are truncated too, the later ones copied
 * without gaps.
 *
 * The notes live in the ring buffer's metadata page (hs_rb_meta.reader_notes): 96 slots of
 * (tid, end, gaps), slot tid % 96, written by the daemon only. The daemon writes a slot when a
 * complete unwind ends elsewhere than its note says (a new thread, or a thread id reused), and
 * sets it to HS_STACK_HINT_NONE for good when a copy that stopped at the note was too short
 * (a thread whose samples do not all end at the same frame: its copies go back to the full
 * stack). The client uses a note only for its own thread, on that thread's own stack, above
 * the stack pointer and below the bound it found itself (hs_stack_copy_end): a stale or
 * torn note can cost one truncated sample, never a read outside the stack.
 *
 * Protocol: one writer (the daemon), a sequence lock per slot. Writing: seq + 1 (odd: being
 * written), release fence, tid and end, then seq + 2 with release. Reading: seq (acquire; odd:
 * no note), tid and end, acquire fence, seq again; the note counts only when seq did not move
 * and tid is the caller's. (Checking the tid twice instead would let a slot that went from
 * one thread to another and back between the reads pass the other thread's end.)
 */
#ifndef HEAPSCOPE_PROFILER_STACK_HINTS_H
#define HEAPSCOPE_PROFILER_STACK_HINTS_H

#include "ring_buffer.h"
#include "stack_gap.h"

#include <stdbool.h>
#include <stdint.h>

#define HS_STACK_HINT_SLOTS 96u
/* A slot's end saying "copy this thread's whole stack" (never an address above a stack
 * pointer). */
#define HS_STACK_HINT_NONE 1u
/* gap[0].below saying "no gaps for this thread from now on" (a copy without them was short). */
#define HS_STACK_HINT_NO_GAPS UINT32_MAX

struct hs_stack_hint {
    uint32_t tid; /* 0: free */
    uint32_t seq; /* odd while the daemon writes the slot */
    uint64_t end; /* one past the last byte the thread's samples need, or HS_STACK_HINT_NONE */
    /* Parts below end the samples need not copy, lowest first: [end - below, end - below +
     * len); len 0 for none. */
    struct {
        uint32_t below, len;
    } gap[HS_STACK_GAPS];
};

/* A part of the stack by its addresses: [lo, hi). */
struct hs_stack_range {
    uint64_t lo, hi;
};

struct hs_stack_hints {
    struct hs_stack_hint slot[HS_STACK_HINT_SLOTS];
};

_Static_assert(sizeof(struct hs_stack_hints) <= HS_RB_READER_NOTES_SIZE,
               "the stack hints must fit the reader's notes");

static inline struct hs_stack_hints *hs_stack_hints_of(struct hs_rb_meta *meta)
{
    return (struct hs_stack_hints *)(void *)meta->reader_notes;
}

/* Client: the end noted for thread tid, or 0 when there is none (or HS_STACK_HINT_NONE). */
uint64_t hs_stack_hint_lookup(const struct hs_stack_hints *h, uint32_t tid);

/* Client: the same, and the gaps noted with it (lowest first, each checked to lie below the
 * end, in order and apart; none when any is not) in gaps, their number in *ngaps. */
uint64_t hs_stack_hint_lookup_gaps(const struct hs_stack_hints *h, uint32_t tid,
                                   struct hs_stack_range gaps[HS_STACK_GAPS], unsigned *ngaps);

/* Daemon: a sample of tid unwound completely, reading nothing at or above end. Notes end
 * unless the slot already says so, or says HS_STACK_HINT_NONE for tid. */
void hs_stack_hint_learn(struct hs_stack_hints *h, uint32_t tid, uint64_t end);

/* Daemon: the same, and the n parts below end (lowest first, in order and apart) that the
 * unwind did not read, to be left out of the next copies; kept out of the note once refused
 * for tid (hs_stack_hint_refuse_gaps). A part too far below end for the slot is dropped. */
void hs_stack_hint_learn_gaps(struct hs_stack_hints *h, uint32_t tid, uint64_t end,
                              const struct hs_stack_range *gaps, unsigned n);

/* Daemon: a sample of tid whose copy ended at copy_end was truncated. When that is where
 * tid's note stood, the note becomes HS_STACK_HINT_NONE and true is returned. */
bool hs_stack_hint_refuse(struct hs_stack_hints *h, uint32_t tid, uint64_t copy_end);

/* Daemon: the cap longest parts, of at least HS_STACK_GAP_MIN bytes each, that the ranges a
 * and b (each lowest first and apart) have in common, lowest first, into out; returns their
 * number. A part that unwinds from different call paths all left unread is one the daemon can
 * note (profiled_process.c): the locals of an outer frame, not of one inner path. With b the
 * whole address space, the cap longest of a. */
unsigned hs_stack_ranges_common(const struct hs_stack_range *a, unsigned na,
                                const struct hs_stack_range *b, unsigned nb,
                                struct hs_stack_range *out, unsigned cap);

/* Daemon: a sample of tid needed a word of a part its copy left out. When tid's note has
 * gaps, it keeps its end but loses them for good, and true is returned. */
bool hs_stack_hint_refuse_gaps(struct hs_stack_hints *h, uint32_t tid);

#endif
