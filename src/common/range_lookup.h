/* range_lookup.h: the tools' one binary search, and lookups of an address in a sorted array
 * of [begin, end) ranges (mappings, symbols, heaps, compile units) built on it.
 *
 * Macros over any element type, the fields named by the caller, so each lookup compiles to
 * the same tight loop a hand-written search would (no callback, no stride arithmetic). They
 * are GNU statement expressions; every argument is evaluated once except `pred`, evaluated
 * once per step with `i` bound to the probed index. Addresses are compared as uint64_t.
 *
 * The arrays must be sorted by begin. hs_range_find wants the ranges disjoint as well (then
 * their ends are sorted too); with overlapping ranges it still never returns a range that
 * does not hold addr, but it may return "none" although one does (callers whose ranges may
 * overlap walk back from hs_range_upper_bound instead, as the symbol tables do).
 * hs_ranges_disjoint says whether an array meets hs_range_find's precondition (for
 * hs_assert_expensive and tests). No allocation, no lock: usable anywhere.
 */
#ifndef HEAPSCOPE_COMMON_RANGE_LOOKUP_H
#define HEAPSCOPE_COMMON_RANGE_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first index i in [0, n) at which pred holds, n if none; pred, an expression of i, must
 * be false up to some index and true from there on. */
#define hs_partition_point(n, i, pred)                                                             \
    __extension__({                                                                                \
        size_t hs_lo_ = 0, hs_hi_ = (n);                                                           \
        while (hs_lo_ < hs_hi_) {                                                                  \
            size_t i = hs_lo_ + (hs_hi_ - hs_lo_) / 2;                                             \
            if (pred)                                                                              \
                hs_hi_ = i;                                                                        \
            else                                                                                   \
                hs_lo_ = i + 1;                                                                    \
        }                                                                                          \
        hs_lo_;                                                                                    \
    })

/* The number of entries of a[0..n) with BEGIN <= addr: the last of them is at index
 * result - 1 (none when 0). */
#define hs_range_upper_bound(a, n, addr, BEGIN)                                                    \
    __extension__({                                                                                \
        __typeof__(&(a)[0]) hs_ra_ = (a);                                                          \
        uint64_t hs_rx_ = (uint64_t)(addr);                                                        \
        hs_partition_point((n), hs_ri_, (uint64_t)hs_ra_[hs_ri_].BEGIN > hs_rx_);                  \
    })

/* The first index of a[0..n) with END > addr, n if none (the ends must be sorted). */
#define hs_range_first_ending_after(a, n, addr, END)                                               \
    __extension__({                                                                                \
        __typeof__(&(a)[0]) hs_ra_ = (a);                                                          \
        uint64_t hs_rx_ = (uint64_t)(addr);                                                        \
        hs_partition_point((n), hs_ri_, (uint64_t)hs_ra_[hs_ri_].END > hs_rx_);                    \
    })

/* The index of the range of a[0..n) with BEGIN <= addr < END, n if none (ranges sorted and
 * disjoint; see the header for overlapping ones). */
#define hs_range_find(a, n, addr, BEGIN, END)                                                      \
    __extension__({                                                                                \
        __typeof__(&(a)[0]) hs_fa_ = (a);                                                          \
        size_t hs_fn_ = (n);                                                                       \
        uint64_t hs_fx_ = (uint64_t)(addr);                                                        \
        size_t hs_fi_ = hs_range_first_ending_after(hs_fa_, hs_fn_, hs_fx_, END);                  \
        (hs_fi_ < hs_fn_ && (uint64_t)hs_fa_[hs_fi_].BEGIN <= hs_fx_) ? hs_fi_ : hs_fn_;           \
    })

/* True when a[0..n)'s ranges are each non-empty, sorted by BEGIN and disjoint. */
#define hs_ranges_disjoint(a, n, BEGIN, END)                                                       \
    __extension__({                                                                                \
        __typeof__(&(a)[0]) hs_da_ = (a);                                                          \
        size_t hs_dn_ = (n);                                                                       \
        bool hs_ok_ = true;                                                                        \
        for (size_t hs_di_ = 0; hs_ok_ && hs_di_ < hs_dn_; hs_di_++)                               \
            hs_ok_ = (uint64_t)hs_da_[hs_di_].BEGIN < (uint64_t)hs_da_[hs_di_].END &&              \
                     (hs_di_ == 0 ||                                                               \
                      (uint64_t)hs_da_[hs_di_ - 1].END <= (uint64_t)hs_da_[hs_di_].BEGIN);         \
        hs_ok_;                                                                                    \
    })

#endif
