/* profiled_process.c: one profiled process, seen from the daemon (see profiled_process.h). */
#define _GNU_SOURCE /* struct ucred */
#include "clock.h"
#include "profiled_process.h"

#include "handshake.h"
#include "heap_tracker.h"
#include "hs_assert.h"
#include "log.h"
#include "perf_map.h"
#include "presymbolizer.h"
#include "proc_maps.h"
#include "profile_writer.h"
#include "records.h"
#include "ring_buffer.h"
#include "stack_hints.h"
#include "symbolizer.h"
#include "unix_socket.h"
#include "unwinder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Re-reading the maps when an unwind meets an unknown pc: at once for a pc not seen before (a
 * library just dlopen'ed: its samples keep their whole stacks), up to 100 times a second; for
 * a pc that was still unknown after a re-read (JIT code, garbage) only every 500 ms. */
#define MAPS_REREAD_NS 500000000ull
#define NEW_PC_REREADS_PER_SECOND 100
#define UNKNOWN_PCS 16
#define STALL_AFTER_END_NS 200000000ull
#define IDLE_BEFORE_PAUSE_NS 200000000ull /* poll, not sleep, for 200 ms after a record */
#define MAX_PCS 256

struct stats {
    uint64_t records, mallocs, frees, heaps;
    uint64_t corrupt_records;
    uint64_t unwinds[HS_UNWIND_BAD_FRAME + 1]; /* by enum hs_unwind_stop */
    uint64_t maps_reads;
    uint64_t max_record_interval;
    uint64_t unwind_ns, bookkeeping_ns; /* time spent on samples, for the statistics */
    uint64_t stack_bytes;               /* stack copied by the client, all samples */
    uint64_t stack_used;                /* of which the unwinder read (hs_unwind_result) */
    uint64_t hints_refused;             /* copies cut short by a stack hint (stack_hints.h) */
    uint64_t stack_left_out;            /* stack in the gaps the copies left out, all samples */
    uint64_t gaps_refused;              /* copies that lacked a word of a gap they left out */
    uint64_t max_requested_interval;    /* the largest interval asked for (--max-rate) */
    uint64_t dumps;
};

/* How long the same parts must stay unread before they are noted as gaps: a program's start
 * (python's initialisation, say) has outer frames that return soon after, and the copies taken
 * until the daemon hears of it would all be truncated. */
#define GAP_STABLE_NS (200ull * 1000000ull)

/* A thread's last complete unwind: its stack pointer, the parts it left unread and its highest
 * words read (absolute addresses), which the next one must confirm from another call path
 * before they become gaps (note_stack_end). */
struct unread_seen {
    uint32_t tid;
    unsigned n, nouter;
    uint64_t rsp;
    struct hs_stack_range part[HS_UNWIND_UNREAD];
    struct hs_unwind_word outer[HS_UNWIND_OUTER_READS];
    /* The parts every confirmation kept, each since when: gaps once that is GAP_STABLE_NS
     * ago. */
    unsigned ncand;
    struct hs_stack_range cand[HS_UNWIND_UNREAD];
    uint64_t cand_since_ns[HS_UNWIND_UNREAD];
};

/* Updates the thread's candidates with the parts this confirmation found (fresh, lowest first):
 * a candidate keeps what of it fresh still has, and its age; a part of fresh that meets no
 * candidate becomes one, from now; a candidate fresh lacks goes. */
static void update_candidates(struct unread_seen *seen, const struct hs_stack_range *fresh,
                              unsigned nf, uint64_t now_ns)
{
    struct hs_stack_range cand[HS_UNWIND_UNREAD];
    uint64_t since[HS_UNWIND_UNREAD];
    unsigned n = 0;
    for (unsigned i = 0; i < nf && n < HS_UNWIND_UNREAD; i++) {
        bool met = false;
        for (unsigned j = 0; j < seen->ncand && n < HS_UNWIND_UNREAD; j++) {
            struct hs_stack_range piece;
            if (hs_stack_ranges_common(&fresh[i], 1, &seen->cand[j], 1, &piece, 1) == 1) {
                cand[n] = piece;
                since[n++] = seen->cand_since_ns[j];
                met = true;
            }
        }
        if (!met) {
            cand[n] = fresh[i];
            since[n++] = now_ns;
        }
    }
    memcpy(seen->cand, cand, n * sizeof cand[0]);
    memcpy(seen->cand_since_ns, since, n * sizeof since[0]);
    seen->ncand = n;
}

/* The HS_STACK_GAPS longest candidates that have lasted GAP_STABLE_NS, lowest first. */
static unsigned stable_candidates(const struct unread_seen *seen, uint64_t now_ns,
                                  struct hs_stack_range gaps[HS_STACK_GAPS])
{
    struct hs_stack_range old[HS_UNWIND_UNREAD];
    unsigned n = 0;
    for (unsigned i = 0; i < seen->ncand; i++)
        if (now_ns - seen->cand_since_ns[i] >= GAP_STABLE_NS)
            old[n++] = seen->cand[i];
    const struct hs_stack_range all = {0, UINT64_MAX};
    return hs_stack_ranges_common(old, n, &all, 1, gaps, HS_STACK_GAPS);
}

/* The lowest address down to which the unwind res of sample m read the same words, with the same
 * values, as the thread's last one (seen), from the top: above it the same activations were on
 * the stack both times. UINT64_MAX when their highest words differ. */
static uint64_t stable_floor(const struct unread_seen *seen, const struct hs_record_malloc *m,
                             const struct hs_unwind_result *res)
{
    uint64_t floor = UINT64_MAX;
    for (unsigned i = 0; i < seen->nouter && i < res->nouter; i++) {
        uint64_t addr = m->regs.rsp + res->outer[i].off;
        if (seen->outer[i].off != addr || seen->outer[i].val != res->outer[i].val)
            break;
        floor = addr;
    }
    return floor;
}

struct hs_profiled_process {
    const struct hs_daemon_config *cfg;
    pid_t pid;
    int session; /* 1 for the pid's first session, 2 for the next (after an exec) ... */
    char program[64];
    int sock, maps_fd, mem_fd;
    uintptr_t client_pc;
    uintptr_t client_start, client_end;
    struct hs_rb rb;
    struct hs_unwinder *unwinder;
    struct hs_symbolizer *symbolizer;
    struct hs_presym *presym; /* symbolizes new call sites while the process runs */
    size_t presym_cursor;     /* the tracker's pcs handed to it so far (hs_tracker_new_pcs) */
    struct hs_tracker *tracker;
    char *maps;
    size_t maps_len, maps_cap;
    uint64_t maps_read_ns;
    uintptr_t unknown_pcs[UNKNOWN_PCS]; /* still unknown after a re-read (a small ring) */
    unsigned next_unknown;
    uint64_t reread_window_ns; /* start of the second counted in rereads_in_window */
    unsigned rereads_in_window;
    uint8_t *scratch; /* a private copy of the record being applied */
    size_t scratch_cap;
    uint64_t start_ns, start_wall_ns;
    uint64_t last_record_ns;
    uint64_t bytes_window; /* record bytes since hs_process_take_bytes */
    bool client_gone, stopped, drained;
    enum hs_rb_status broken;
    char stop_reason[128];
    char last_profile[PATH_MAX + 16];
    struct stats st;
    /* Per thread, slot tid % HS_STACK_HINT_SLOTS as the notes' (note_stack_end). */
    struct unread_seen unread_seen[HS_STACK_HINT_SLOTS];
};

/* ---- Sessions per pid (an exec keeps the pid and starts a new session) ---------------------- */

static struct {
    pid_t pid;
    int sessions;
} g_seen[1024];
static size_t g_num_seen, g_next_evict;

static int next_session_number(pid_t pid)
{
    for (size_t i = 0; i < g_num_seen; i++)
        if (g_seen[i].pid == pid)
            return ++g_seen[i].sessions;
    size_t i = g_num_seen < sizeof(g_seen) / sizeof(g_seen[0]) ? g_num_seen++
                                                               : g_next_evict++ % g_num_seen;
    g_seen[i].pid = pid;
    g_seen[i].sessions = 1;
    return 1;
}

/* The highest session number of PROGRAM.PID in dir (an earlier daemon's profiles of the same
 * process, attached again): "PROGRAM.PID." is session 1, "PROGRAM.PID-K." session K. */
static int sessions_on_disk(const char *dir, const char *program, pid_t pid)
{
    char prefix[128];
    int n = snprintf(prefix, sizeof(prefix), "%s.%d", program, (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL || n <= 0 || (size_t)n >= sizeof(prefix)) {
        if (d != NULL)
            closedir(d);
        return 0;
    }
    int highest = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)n) != 0)
            continue;
        const char *rest = e->d_name + n;
        int k = 0;
        if (rest[0] == '.')
            k = 1;
        else if (rest[0] == '-')
            k = atoi(rest + 1);
        if (k > highest)
            highest = k;
    }
    closedir(d);
    return highest;
}

/* ---- Maps -------------------------------------------------------------------------------- */

struct find_client {
    uintptr_t pc, start, end;
};

static int find_client_mapping(const struct hs_map *m, void *arg)
{
    struct find_client *f = arg;
    if (f->pc >= m->start && f->pc < m->end && (m->perms & HS_MAP_EXEC)) {
        f->start = m->start;
        f->end = m->end;
        return 1;
    }
    return 0;
}

/* Reads the process's maps through its descriptor and hands them to the unwinder and the
 * symbolizer. Returns 0, or -1 (the previous maps stay). */
static int read_maps(struct hs_profiled_process *p)
{
    if (lseek(p->maps_fd, 0, SEEK_SET) != 0)
        return -1;
    size_t len = 0;
    for (;;) {
        if (p->maps_cap - len < 4096) {
            size_t cap = p->maps_cap ? p->maps_cap * 2 : 65536;
            char *m = realloc(p->maps, cap);
            if (m == NULL)
                return -1;
            p->maps = m;
            p->maps_cap = cap;
        }
        ssize_t n = read(p->maps_fd, p->maps + len, p->maps_cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len == 0)
        return -1; /* the process is gone: keep what we had */
    p->maps_len = len;
    p->maps_read_ns = hs_monotonic_ns();
    p->st.maps_reads++;
    hs_unwinder_set_maps(p->unwinder, p->maps, len);
    hs_presym_lock(p->presym);
    hs_symbolizer_add_maps_text(p->symbolizer, p->maps, len);
    hs_presym_unlock(p->presym);

    struct find_client f = {p->client_pc, 0, 0};
    struct hs_map scratch;
    struct hs_maps_parser parser;
    hs_maps_parser_init(&parser, &scratch);
    if (hs_maps_parser_feed(&parser, p->maps, len, find_client_mapping, &f) == 0)
        hs_maps_parser_finish(&parser, find_client_mapping, &f);
    if (f.end != 0 && (f.start != p->client_start || f.end != p->client_end)) {
        p->client_start = f.start;
        p->client_end = f.end;
        hs_unwinder_skip_range(p->unwinder, 0, 0);
        hs_unwinder_skip_range(p->unwinder, f.start, f.end);
    }
    return 0;
}

/* ---- The handshake ----------------------------------------------------------------------- */

/* True when fd is /proc/PID/NAME of this pid. */
static bool is_proc_file_of(int fd, pid_t pid, const char *name)
{
    char link[64], target[PATH_MAX], want[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    snprintf(want, sizeof(want), "/proc/%d/%s", (int)pid, name);
    return strcmp(target, want) == 0;
}

static void refuse(int sock, const char *reason)
{
    struct hs_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.magic = HS_HANDSHAKE_MAGIC;
    cfg.version = HS_HANDSHAKE_VERSION;
    snprintf(cfg.reason, sizeof(cfg.reason), "%s", reason);
    hs_sock_send(sock, &cfg, sizeof(cfg), NULL, 0);
}

/* Makes s usable inside a file name: no slashes, spaces or control characters. */
static void file_name_part(char *s)
{
    for (char *c = s; *c; c++)
        if (*c == '/' || *c == ' ' || (unsigned char)*c < 32)
            *c = '_';
}

static void read_program_name(pid_t pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        n = snprintf(out, cap, "process");
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0'; /* comm ends with a newline */
    file_name_part(out);
}

static bool pid_wanted(const struct hs_daemon_config *cfg, pid_t pid)
{
    if (cfg->pids == NULL)
        return true;
    for (size_t i = 0; i < cfg->num_pids; i++)
        if (cfg->pids[i] == pid)
            return true;
    return false;
}

struct hs_profiled_process *hs_process_accept(int sock, const struct hs_daemon_config *cfg,
                                              char *err, size_t err_cap)
{
    struct hs_profiled_process *p = calloc(1, sizeof(*p));
    int fds[2] = {-1, -1}, nfds = 0;
    struct hs_hello hello;
    const char *why = NULL;
    if (p == NULL) {
        snprintf(err, err_cap, "out of memory");
        close(sock);
        return NULL;
    }
    p->cfg = cfg;
    p->sock = sock;
    p->maps_fd = p->mem_fd = -1;

    struct ucred cred;
    socklen_t cred_len = sizeof(cred);
    ssize_t n = -1;
    char version_why[sizeof(((struct hs_config *)0)->reason)];
    if (hs_sock_set_timeout(sock, HS_HANDSHAKE_TIMEOUT_MS) != 0 ||
        getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
        why = "cannot read the peer's credentials";
    } else if (geteuid() != 0 && cred.uid != geteuid()) {
        why = "the process belongs to another user";
    } else if ((n = hs_sock_recv(sock, &hello, sizeof(hello), fds, 2, &nfds)) !=
                   (ssize_t)sizeof(hello) ||
               hello.magic != HS_HANDSHAKE_MAGIC) {
        why = n == 0 ? "the process hung up" : "not a heapscope profiler client";
    } else if (hello.version != HS_HANDSHAKE_VERSION) {
        snprintf(version_why, sizeof(version_why),
                 "a profiler client of another heapscope (wire format %u, this profiler's %u): "
                 "preload this heapscope's libheapprofd.so",
                 hello.version, HS_HANDSHAKE_VERSION);
        why = version_why;
    } else if (hello.pid != cred.pid) {
        why = "the hello names another process";
    } else if (nfds != 2 || !is_proc_file_of(fds[0], cred.pid, "maps") ||
               !is_proc_file_of(fds[1], cred.pid, "mem")) {
        why = "the descriptors passed are not the process's /proc maps and mem";
    } else if (!pid_wanted(cfg, cred.pid)) {
        why = "this profiler was not asked to profile the process";
    }
    p->pid = cred.pid;
    p->maps_fd = nfds > 0 ? fds[0] : -1;
    p->mem_fd = nfds > 1 ? fds[1] : -1;
    if (why == NULL) {
        p->client_pc = (uintptr_t)hello.client_pc;
        p->unwinder = hs_unwinder_new(p->pid, p->mem_fd);
        p->symbolizer = hs_symbolizer_new(NULL);
        p->presym = p->symbolizer ? hs_presym_new(p->symbolizer) : NULL;
        p->tracker = hs_tracker_new();
        p->scratch_cap = sizeof(struct hs_record_malloc) + cfg->max_stack + 64;
        p->scratch = aligned_alloc(64, (p->scratch_cap + 63) & ~(size_t)63);
        if (p->unwinder == NULL || p->symbolizer == NULL || p->presym == NULL ||
            p->tracker == NULL || p->scratch == NULL)
            why = "the profiler is out of memory";
        else if (read_maps(p) != 0)
            why = "cannot read the process's maps";
        else if (hs_rb_create(&p->rb, cfg->buffer_size) != 0)
            why = "cannot create the shared buffer";
    }
    if (why != NULL) {
        refuse(sock, why);
        snprintf(err, err_cap, "pid %d: %s", (int)p->pid, why);
        hs_process_free(p);
        return NULL;
    }
    hs_tracker_set_heap(p->tracker, 0, "libc.malloc", cfg->interval);
    /* Now, while the client waits for the answer: a short-lived one may be gone right after. */
    read_program_name(p->pid, p->program, sizeof(p->program));

    struct hs_config c;
    memset(&c, 0, sizeof(c));
    c.magic = HS_HANDSHAKE_MAGIC;
    c.version = HS_HANDSHAKE_VERSION;
    c.accepted = 1;
    c.flags = cfg->flags;
    c.interval = cfg->interval;
    c.max_interval = cfg->max_interval;
    c.block_timeout_ms = cfg->block_timeout_ms;
    c.max_stack = cfg->max_stack;
    if (hs_sock_send(sock, &c, sizeof(c), &p->rb.fd, 1) != 0) {
        snprintf(err, err_cap, "pid %d: the process hung up during the handshake", (int)p->pid);
        hs_process_free(p);
        return NULL;
    }
    fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
    p->session = next_session_number(p->pid);
    int on_disk = sessions_on_disk(cfg->out_dir, p->program, p->pid);
    if (p->session <= on_disk)
        p->session = on_disk + 1;
    p->start_ns = hs_monotonic_ns();
    p->start_wall_ns = hs_clock_ns(CLOCK_REALTIME);
    return p;
}

int hs_process_socket(const struct hs_profiled_process *p)
{
    return p->sock;
}

pid_t hs_process_pid(const struct hs_profiled_process *p)
{
    return p->pid;
}

void hs_process_on_socket(struct hs_profiled_process *p)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(p->sock, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0)
            continue; /* wake-up bytes */
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0 && errno == EINTR)
            continue;
        break; /* end of file or error: the process is gone or hung up */
    }
    if (!p->client_gone) {
        p->client_gone = true;
        /* What a thread killed mid-write left unpublished will never be. */
        hs_rb_set_stall_timeout(&p->rb, STALL_AFTER_END_NS);
    }
}

/* ---- Applying records -------------------------------------------------------------------- */

static bool maps_worth_rereading(struct hs_profiled_process *p, uintptr_t pc, uint64_t now)
{
    if (now - p->maps_read_ns >= MAPS_REREAD_NS)
        return true;
    for (unsigned i = 0; i < UNKNOWN_PCS; i++)
        if (p->unknown_pcs[i] == pc)
            return false;
    if (now - p->reread_window_ns >= 1000000000ull) {
        p->reread_window_ns = now;
        p->rereads_in_window = 0;
    }
    return p->rereads_in_window++ < NEW_PC_REREADS_PER_SECOND;
}

/* Studies the parts the complete unwind res of sample m left unread (res->parts_known): the
 * thread's candidates and what it keeps of this unwind for the next (struct unread_seen).
 * Returns the gaps to note (stable_candidates), none when no candidate has lasted. */
static unsigned study_unread(struct hs_profiled_process *p, const struct hs_record_malloc *m,
                             const struct hs_unwind_result *res, uint64_t now_ns,
                             struct hs_stack_range gaps[HS_STACK_GAPS])
{
    struct hs_stack_range now[HS_UNWIND_UNREAD];
    for (unsigned i = 0; i < res->nunread; i++) {
        now[i].lo = m->regs.rsp + res->unread[i].off;
        now[i].hi = now[i].lo + res->unread[i].len;
    }
    struct unread_seen *seen = &p->unread_seen[m->tid % HS_STACK_HINT_SLOTS];
    if (seen->tid != m->tid)
        seen->ncand = 0;
    if (seen->tid == m->tid && seen->rsp != m->regs.rsp) {
        struct hs_stack_range common[HS_UNWIND_UNREAD], fresh[HS_UNWIND_UNREAD];
        unsigned nc = hs_stack_ranges_common(seen->part, seen->n, now, res->nunread, common,
                                             HS_UNWIND_UNREAD);
        uint64_t floor = stable_floor(seen, m, res);
        unsigned nf = 0;
        for (unsigned i = 0; i < nc; i++)
            if (common[i].lo > floor) /* (a part lies whole above or below a word read) */
                fresh[nf++] = common[i];
        update_candidates(seen, fresh, nf, now_ns);
    }
    seen->tid = m->tid;
    seen->rsp = m->regs.rsp;
    seen->n = res->nunread;
    memcpy(seen->part, now, res->nunread * sizeof now[0]);
    seen->nouter = res->nouter;
    for (unsigned i = 0; i < res->nouter; i++)
        seen->outer[i] =
            (struct hs_unwind_word){m->regs.rsp + res->outer[i].off, res->outer[i].val};
    return stable_candidates(seen, now_ns, gaps);
}

/* Tells the client how much of this thread's stack its next samples need (stack_hints.h):
 * up to where this complete unwind stopped reading, without the longest parts below that it and
 * the thread's last complete unwind from another stack pointer both left unread, inside the
 * frames of activations both found on the stack (stable_floor), and kept so for GAP_STABLE_NS:
 * the locals of outer frames, which another call path reads only once those frames have
 * returned; or, when a copy that
 * stopped at the note was too short, the whole stack from now on; or, when a copy lacked a
 * word of a part it left out, no parts left out from now on. */
static void note_stack_end(struct hs_profiled_process *p, const struct hs_record_malloc *m,
                           const struct hs_unwind_result *res, uint64_t now_ns)
{
    struct hs_stack_hints *h = hs_stack_hints_of(p->rb.meta);
    if (res->stop == HS_UNWIND_END && res->copy_used > 0) {
        struct hs_stack_range gaps[HS_STACK_GAPS];
        unsigned n = res->parts_known ? study_unread(p, m, res, now_ns, gaps) : 0;
        if (n == 0)
            hs_stack_hint_lookup_gaps(h, m->tid, gaps, &n); /* the gaps as noted */
        hs_stack_hint_learn_gaps(h, m->tid, m->regs.rsp + res->copy_used, gaps, n);
    } else if (res->read_in_gap) {
        if (hs_stack_hint_refuse_gaps(h, m->tid))
            p->st.gaps_refused++;
    } else if (res->stop == HS_UNWIND_TRUNCATED &&
               hs_stack_hint_refuse(h, m->tid,
                                    m->regs.rsp + m->stack_len +
                                        hs_stack_gaps_bytes(m->gaps, m->ngaps))) {
        p->st.hints_refused++;
    }
}

static void apply_malloc(struct hs_profiled_process *p, const struct hs_record_malloc *m,
                         const uint8_t *stack)
{
    uintptr_t pcs[MAX_PCS];
    struct hs_unwind_result res;
    uint64_t t0 = hs_monotonic_ns();
    /* The parts an unwind left unread change slowly: looked for in 1 sample in 8. */
    hs_unwinder_want_parts(p->unwinder, (p->st.mallocs & 7) == 0);
    size_t n = hs_unwind_gapped(p->unwinder, &m->regs, stack, m->stack_len, m->gaps, m->ngaps, pcs,
                                MAX_PCS, &res);
    if (res.stop == HS_UNWIND_UNKNOWN_MAP && maps_worth_rereading(p, res.stop_pc, t0) &&
        read_maps(p) == 0) {
        n = hs_unwind_gapped(p->unwinder, &m->regs, stack, m->stack_len, m->gaps, m->ngaps, pcs,
                             MAX_PCS, &res);
        if (res.stop == HS_UNWIND_UNKNOWN_MAP)
            p->unknown_pcs[p->next_unknown++ % UNKNOWN_PCS] = res.stop_pc;
    }
    note_stack_end(p, m, &res, t0);
    uint64_t t1 = hs_monotonic_ns();
    p->st.unwinds[res.stop]++;
    p->st.mallocs++;
    if (m->interval > p->st.max_record_interval)
        p->st.max_record_interval = m->interval;
    hs_tracker_malloc(p->tracker, m->heap, m->seq, m->addr, m->size, m->sampled, pcs, n, m->ts_ns);
    p->st.unwind_ns += t1 - t0;
    p->st.stack_bytes += m->stack_len;
    p->st.stack_left_out += hs_stack_gaps_bytes(m->gaps, m->ngaps);
    p->st.stack_used += res.copy_used;
    p->st.bookkeeping_ns += hs_monotonic_ns() - t1;
}

static void apply(struct hs_profiled_process *p, const void *data, size_t len)
{
    struct hs_record_view v;
    p->st.records++;
    if (hs_record_decode(data, len, &v) != 0) {
        p->st.corrupt_records++;
        return;
    }
    switch (v.type) {
    case HS_RECORD_MALLOC:
        apply_malloc(p, v.malloc, v.stack);
        break;
    case HS_RECORD_FREE:
        p->st.frees++;
        hs_tracker_record_free(p->tracker, v.free->heap, v.free->seq, v.free->addr);
        break;
    case HS_RECORD_HEAP:
        p->st.heaps++;
        if (v.heap->heap != 0)
            hs_tracker_set_heap(p->tracker, v.heap->heap, v.heap->name, v.heap->interval);
        break;
    }
}

/* Hands the pcs of the call sites made since the last call to the presymbolizer. */
static void presymbolize_new_pcs(struct hs_profiled_process *p)
{
    uintptr_t pcs[256];
    size_t n;
    while ((n = hs_tracker_new_pcs(p->tracker, &p->presym_cursor, pcs, 256)) > 0)
        hs_presym_add(p->presym, pcs, n);
}

static enum hs_drain_state drain_records(struct hs_profiled_process *p, size_t max);

enum hs_drain_state hs_process_drain(struct hs_profiled_process *p, size_t max)
{
    enum hs_drain_state st = drain_records(p, max);
    presymbolize_new_pcs(p);
    return st;
}

static enum hs_drain_state drain_records(struct hs_profiled_process *p, size_t max)
{
    if (p->broken != HS_RB_OK || p->drained)
        return HS_DRAIN_IDLE;
    size_t applied = 0;
    for (size_t i = 0; i < max; i++) {
        struct hs_rb_record rec;
        enum hs_rb_status st = hs_rb_peek(&p->rb, &rec);
        if (st == HS_RB_OK) {
            size_t len = rec.len;
            if (len > p->scratch_cap) {
                p->st.records++;
                p->st.corrupt_records++; /* bigger than any honest record */
                hs_rb_consume(&p->rb);
                continue;
            }
            memcpy(p->scratch, rec.data, len); /* the client may still write there */
            p->bytes_window += len;
            apply(p, p->scratch, len);
            /* Only now: an exiting client waits for its buffer to be empty, so that its maps
             * can still be read for the records it leaves (see the client's session.c). */
            hs_rb_consume(&p->rb);
            applied++;
            continue;
        }
        if (st == HS_RB_EMPTY) {
            if (p->client_gone || p->stopped) {
                p->drained = true;
                return HS_DRAIN_IDLE;
            }
            uint64_t now = hs_monotonic_ns();
            if (applied > 0)
                p->last_record_ns = now;
            if (now - p->last_record_ns < IDLE_BEFORE_PAUSE_NS)
                return HS_DRAIN_SOON;
            if (hs_rb_reader_pause(&p->rb))
                return HS_DRAIN_IDLE;
            continue;
        }
        /* A record still being written: its writer needs a CPU to finish it, so the reader
         * looks again in a few ms instead of at once. Looking again at once was a busy loop
         * that, where the program keeps every CPU busy, took the CPU from that very writer:
         * malloc_bench at 2 threads on 2 CPUs, 17,000-25,000 polls in a 0.5 s run against
         * ~230 at one thread. */
        if (st == HS_RB_PENDING)
            return HS_DRAIN_SOON;
        p->broken = st;
        hs_log("pid %d (%s): stopped reading its buffer: %s", (int)p->pid, p->program,
               hs_rb_status_text(st));
        return HS_DRAIN_IDLE;
    }
    p->last_record_ns = hs_monotonic_ns();
    return HS_DRAIN_MORE;
}

void hs_process_stop(struct hs_profiled_process *p, const char *why)
{
    if (p->stopped)
        return;
    p->stopped = true;
    snprintf(p->stop_reason, sizeof(p->stop_reason), "%s", why);
    hs_rb_set_shutdown(&p->rb);
    hs_rb_reader_resume(&p->rb);
    hs_rb_set_stall_timeout(&p->rb, STALL_AFTER_END_NS);
}

uint64_t hs_process_take_bytes(struct hs_profiled_process *p)
{
    uint64_t n = p->bytes_window;
    p->bytes_window = 0;
    return n;
}

void hs_process_request_interval(struct hs_profiled_process *p, uint64_t interval)
{
    __atomic_store_n(&p->rb.meta->requested_interval, interval, __ATOMIC_RELAXED);
    if (interval > p->st.max_requested_interval)
        p->st.max_requested_interval = interval;
}

bool hs_process_finished(const struct hs_profiled_process *p)
{
    return (p->client_gone || p->stopped) && (p->drained || p->broken != HS_RB_OK);
}

size_t hs_process_memory(const struct hs_profiled_process *p)
{
    struct hs_unwind_stats us;
    hs_unwinder_stats(p->unwinder, &us);
    return sizeof(*p) + p->maps_cap + p->scratch_cap + hs_tracker_memory(p->tracker) +
           us.cache_bytes;
}

/* ---- Dumps -------------------------------------------------------------------------------- */

#define MAX_COMMENTS 20

/* The daemon's resident memory, from /proc/self/statm. */
uint64_t hs_daemon_resident_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
#define COMMENT_LEN 200

static size_t stats_comments(const struct hs_profiled_process *p, char c[][COMMENT_LEN])
{
    size_t n = 0;
    const struct stats *s = &p->st;
    struct hs_rb_stats rs;
    hs_rb_get_stats(&p->rb, &rs);
    struct hs_tracker_stats ts;
    hs_tracker_get_stats(p->tracker, &ts);
    uint64_t unwound = 0;
    for (size_t i = 0; i <= HS_UNWIND_BAD_FRAME; i++)
        unwound += s->unwinds[i];
    snprintf(c[n++], COMMENT_LEN, "program: %s (pid %d, session %d)", p->program, (int)p->pid,
             p->session);
    snprintf(c[n++], COMMENT_LEN,
             "records: %llu (samples %llu, frees %llu, heaps %llu), corrupt records: %llu",
             (unsigned long long)s->records, (unsigned long long)s->mallocs,
             (unsigned long long)s->frees, (unsigned long long)s->heaps,
             (unsigned long long)s->corrupt_records);
    snprintf(
        c[n++], COMMENT_LEN,
        "sampling interval: %llu bytes (largest in force: %llu; adaptive sampling %s)",
        (unsigned long long)p->cfg->interval,
        (unsigned long long)(s->max_record_interval ? s->max_record_interval : p->cfg->interval),
        (p->cfg->flags & HS_CONFIG_ADAPTIVE) ? "on" : "off");
    snprintf(c[n++], COMMENT_LEN,
             "unwinding: %llu stacks: %llu complete, %llu at the frame limit, %llu truncated "
             "copies, %llu unknown map, %llu not code, %llu no unwind info, %llu bad frame",
             (unsigned long long)unwound, (unsigned long long)s->unwinds[HS_UNWIND_END],
             (unsigned long long)s->unwinds[HS_UNWIND_MAX_FRAMES],
             (unsigned long long)s->unwinds[HS_UNWIND_TRUNCATED],
             (unsigned long long)s->unwinds[HS_UNWIND_UNKNOWN_MAP],
             (unsigned long long)s->unwinds[HS_UNWIND_NOT_CODE],
             (unsigned long long)s->unwinds[HS_UNWIND_NO_INFO],
             (unsigned long long)s->unwinds[HS_UNWIND_BAD_FRAME]);
    snprintf(c[n++], COMMENT_LEN, "maps read: %llu times", (unsigned long long)s->maps_reads);
    if (s->max_requested_interval > 0)
        snprintf(c[n++], COMMENT_LEN,
                 "the daemon's data-rate bound (--max-rate) asked for an interval of up to %llu "
                 "bytes",
                 (unsigned long long)s->max_requested_interval);
    if (s->mallocs > 0)
        snprintf(c[n++], COMMENT_LEN,
                 "per sample (mean): %.0f bytes of stack copied, daemon %.2f us unwinding and "
                 "%.2f us bookkeeping",
                 (double)s->stack_bytes / (double)s->mallocs,
                 (double)s->unwind_ns / 1000.0 / (double)s->mallocs,
                 (double)s->bookkeeping_ns / 1000.0 / (double)s->mallocs);
    if (s->mallocs > 0)
        snprintf(c[n++], COMMENT_LEN,
                 "stack copies: %.0f bytes per sample read by the unwinder (mean); %llu cut "
                 "short by a thread's stack hint (that thread's copies are whole since)",
                 (double)s->stack_used / (double)s->mallocs, (unsigned long long)s->hints_refused);
    if (s->mallocs > 0)
        snprintf(c[n++], COMMENT_LEN,
                 "stack gaps: %.0f bytes per sample left out of the copies, parts of big frames "
                 "the unwinder did not read (mean); %llu copies lacked a word of one (that "
                 "thread's copies have no gaps since)",
                 (double)s->stack_left_out / (double)s->mallocs,
                 (unsigned long long)s->gaps_refused);
    if (p->cfg->flags & HS_CONFIG_BLOCK_CLIENT)
        snprintf(c[n++], COMMENT_LEN,
                 "buffer overran: no (blocking: writers waited for room %llu times), lock waits "
                 "%llu, lock timeouts %llu",
                 (unsigned long long)rs.overflows, (unsigned long long)rs.spinlock_waits,
                 (unsigned long long)rs.failed_spinlocks);
    else
        snprintf(c[n++], COMMENT_LEN,
                 "buffer overran: %s (%llu samples dropped), lock waits %llu, lock timeouts %llu",
                 rs.overflows ? "yes" : "no", (unsigned long long)rs.overflows,
                 (unsigned long long)rs.spinlock_waits, (unsigned long long)rs.failed_spinlocks);
    snprintf(c[n++], COMMENT_LEN, "client disconnected: %s%s%s", p->client_gone ? "yes" : "no",
             p->broken != HS_RB_OK ? "; buffer given up: " : "",
             p->broken != HS_RB_OK ? hs_rb_status_text(p->broken) : "");
    if (p->stopped)
        snprintf(c[n++], COMMENT_LEN, "session stopped by the daemon: %s", p->stop_reason);
    snprintf(c[n++], COMMENT_LEN,
             "tracker: %llu callsites, %llu live sampled blocks, frees of unknown blocks %llu, "
             "reordered %llu",
             (unsigned long long)ts.callsites, (unsigned long long)ts.live_blocks,
             (unsigned long long)ts.frees_unknown, (unsigned long long)ts.frees_reordered);
    struct hs_presym_stats ps;
    hs_presym_get_stats(p->presym, &ps);
    snprintf(c[n++], COMMENT_LEN,
             "symbolizing: %llu pcs of call sites done during the run, %llu left to the dumps "
             "(waited %llu times for a CPU the program left idle)",
             (unsigned long long)ps.symbolized, (unsigned long long)(ps.queued - ps.symbolized),
             (unsigned long long)ps.paused);
    snprintf(c[n++], COMMENT_LEN,
             "daemon memory: %zu KiB of bookkeeping for this process, %llu KiB resident in "
             "all (shared buffers and symbol tables included)",
             hs_process_memory(p) / 1024, (unsigned long long)(hs_daemon_resident_bytes() >> 10));
    hs_assert(n < MAX_COMMENTS); /* dump_label adds the perf map's line */
    return n;
}

/* Writes one file through a temporary name, so that readers never see half a profile. */
static int write_file(struct hs_profiled_process *p, uint32_t heap, const char *path,
                      const struct hs_profile_meta *meta, bool android)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL) {
        int err = errno;
        hs_log("cannot write %s: %s", tmp, strerror(err));
        if (p->cfg->write_failed)
            p->cfg->write_failed(p->pid, path, strerror(err));
        return -1;
    }
    int rc;
    if (android) {
        rc = hs_profile_write_android(p->tracker, heap, meta, f);
    } else {
        hs_presym_lock(p->presym);
        rc = hs_profile_write_pprof(p->tracker, heap, p->symbolizer, meta, f);
        hs_presym_unlock(p->presym);
    }
    int err = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        hs_log("cannot write %s: %s", path, strerror(err));
        if (p->cfg->write_failed)
            p->cfg->write_failed(p->pid, path, strerror(err));
    }
    return rc;
}

/* "DIR/PROGRAM.PID[-SESSION].LABEL[.HEAP]" */
static void base_name(const struct hs_profiled_process *p, const char *label, uint32_t heap,
                      char *out, size_t cap)
{
    char session[16] = "";
    if (p->session > 1)
        snprintf(session, sizeof(session), "-%d", p->session);
    char heap_part[HS_RECORD_HEAP_NAME_MAX + 1] = "";
    if (heap != 0) {
        const char *name = hs_tracker_heap_name(p->tracker, heap);
        snprintf(heap_part, sizeof(heap_part), ".%s", name ? name : "heap");
        file_name_part(heap_part + 1);
    }
    snprintf(out, cap, "%s/%s.%d%s.%s%s", p->cfg->out_dir, p->program, (int)p->pid, session, label,
             heap_part);
}

static int dump_label(struct hs_profiled_process *p, const char *label, bool at_peak)
{
    char comments[MAX_COMMENTS][COMMENT_LEN];
    const char *lines[MAX_COMMENTS];
    size_t num = stats_comments(p, comments);
    /* JIT code names, as the runtime wrote them so far (Node.js --perf-basic-prof, ...). */
    struct hs_perf_map *jit = hs_perf_map_load(p->pid);
    if (jit != NULL)
        snprintf(comments[num++], COMMENT_LEN, "perf map: %zu names of JIT code",
                 hs_perf_map_size(jit));
    for (size_t i = 0; i < num; i++)
        lines[i] = comments[i];
    struct hs_profile_meta meta = {
        .pid = (int)p->pid,
        .time_ns = hs_clock_ns(CLOCK_REALTIME),
        .duration_ns = hs_monotonic_ns() - p->start_ns,
        .interval = p->cfg->interval,
        .maps = p->maps,
        .maps_len = p->maps_len,
        .comments = lines,
        .num_comments = num,
        .at_peak = at_peak,
        .perf_map = jit,
    };
    int rc = 0;
    for (uint32_t heap = 0; heap < HS_TRACKER_MAX_HEAPS; heap++) {
        if (!hs_tracker_heap_used(p->tracker, heap) && heap != 0)
            continue;
        char base[PATH_MAX], path[PATH_MAX + 16];
        base_name(p, label, heap, base, sizeof(base));
        snprintf(path, sizeof(path), "%s.pb.gz", base);
        uint64_t t0 = hs_monotonic_ns();
        if (write_file(p, heap, path, &meta, false) != 0) {
            rc = -1;
        } else {
            hs_log("pid %d (%s): wrote %s in %llu ms", (int)p->pid, p->program, path,
                   (unsigned long long)((hs_monotonic_ns() - t0) / 1000000));
            if (heap == 0 && !at_peak)
                memcpy(p->last_profile, path, sizeof(p->last_profile));
        }
        if (p->cfg->android_dump && !at_peak) {
            snprintf(path, sizeof(path), "%s.txt", base);
            if (write_file(p, heap, path, &meta, true) != 0)
                rc = -1;
        }
    }
    for (size_t i = 0; i < num; i++)
        hs_log("pid %d (%s): %s", (int)p->pid, p->program, comments[i]);
    hs_perf_map_free(jit);
    return rc;
}

int hs_process_dump(struct hs_profiled_process *p, enum hs_dump_kind kind)
{
    if (kind == HS_DUMP_FINAL) {
        int rc = dump_label(p, "final", false);
        if (p->cfg->dump_at_max && dump_label(p, "max", true) != 0)
            rc = -1;
        return rc;
    }
    char label[32];
    snprintf(label, sizeof(label), "%llu", (unsigned long long)++p->st.dumps);
    return dump_label(p, label, false);
}

const char *hs_process_last_profile(const struct hs_profiled_process *p)
{
    return p->last_profile;
}

void hs_process_free(struct hs_profiled_process *p)
{
    if (p == NULL)
        return;
    if (p->rb.meta != NULL) {
        hs_rb_set_shutdown(&p->rb);
        hs_rb_destroy(&p->rb);
    }
    if (p->sock >= 0)
        close(p->sock);
    hs_unwinder_free(p->unwinder); /* before mem_fd, which it borrows */
    if (p->maps_fd >= 0)
        close(p->maps_fd);
    if (p->mem_fd >= 0)
        close(p->mem_fd);
    hs_presym_free(p->presym); /* first: its worker may be using the symbolizer */
    hs_symbolizer_free(p->symbolizer);
    hs_tracker_free(p->tracker);
    free(p->maps);
    free(p->scratch);
    free(p);
}
