/* session.c: the profiler client's session with the daemon: the handshake, writing into the
 * shared buffer under the session's policy, the end of a session, fork, the profiling
 * signal, and the start-up configuration.
 *
 * Environment (read once at start):
 *   HEAPSCOPE_PROFILE_SOCKET  the daemon's address ("@NAME": abstract socket); when set, the
 *                             client connects at start (see HEAPSCOPE_PROFILE_PID)
 *   HEAPSCOPE_PROFILE_PID     connect at start only in the process with this pid (so that the
 *                             programs it runs stay dormant), unless
 *   HEAPSCOPE_PROFILE_FOLLOW  "1": every process connects (children after exec, and forked
 *                             children at once, each in a session of its own)
 *   HEAPSCOPE_PROFILE_SIGNAL  the profiling signal (default 36; 0: none). Its value, given by
 *                             sigqueue, is the pid of a daemon listening on
 *                             "@heapscope-heapprofd.PID"; without a value (kill -36) the client
 *                             connects to HEAPSCOPE_PROFILE_SOCKET, else to the system daemon's
 *                             HS_CLIENT_SYSTEM_SOCKET (heapprofd.socket).
 * Everything here is async-signal-safe: the handshake runs in the signal handler, so that an
 * idle process attaches too. The session's socket raises the same signal when the daemon
 * hangs up (O_ASYNC, F_SETSIG), so that an idle process also follows the end of a session
 * at once rather than at its next sampled allocation.
 *
 * Messages: a preloaded client logs like Android's ("heapprofd: profiling stopped: ...");
 * an injected one never writes into the program's stderr (the command attached from
 * outside reports on its side: the daemon tells it who connected, was refused or finished).
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "clock.h"
#include "client.h"
#include "env.h"
#include "errno_text.h"
#include "format.h"
#include "handshake.h"
#include "log.h"
#include "sampled_set.h"
#include "signals.h"
#include "unix_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TAG "heapprofd"
#define ADDRESS_MAX 108
#define RETRY_NS 100000ull         /* a full buffer is retried every 100 us */
#define RAISE_EVERY_NS 10000000ull /* adaptive sampling: at most one raise per 10 ms */
#define LOWER_EVERY_NS 200000000ull

struct hs_client hs_client = {.sock = -1, .rb = {.fd = -1}};

static char g_address[ADDRESS_MAX]; /* HEAPSCOPE_PROFILE_SOCKET */
static int g_follow;
static int g_signal; /* the profiling signal when our handler has it, else 0 */
static __thread uint32_t t_tid __attribute__((tls_model("initial-exec")));

uint64_t hs_client_now_ns(void)
{
    return hs_monotonic_ns();
}

uint32_t hs_client_tid(void)
{
    if (t_tid == 0)
        t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

/* A line for the program's log, only when the client was preloaded (see above). */
static void client_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void client_log(const char *fmt, ...)
{
    if (hs_client_injected())
        return;
    va_list ap;
    va_start(ap, fmt);
    hs_vlog_tag(TAG, fmt, ap);
    va_end(ap);
}

/* ---- Using the buffer --------------------------------------------------------------------- */

void hs_client_publish_fast_limit(void)
{
    uint64_t limit = 0;
    if (__atomic_load_n(&hs_client.state, __ATOMIC_SEQ_CST) == HS_CLIENT_ON)
        limit = __atomic_load_n(&hs_client.interval, __ATOMIC_RELAXED) - 1;
    __atomic_store_n(&hs_client.fast_limit, limit, __ATOMIC_RELAXED);
    /* The session may have ended in between: then no limit stays behind it. */
    if (limit != 0 && __atomic_load_n(&hs_client.state, __ATOMIC_SEQ_CST) != HS_CLIENT_ON)
        __atomic_store_n(&hs_client.fast_limit, 0, __ATOMIC_RELAXED);
}

bool hs_client_enter(void)
{
    __atomic_add_fetch(&hs_client.inflight, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&hs_client.state, __ATOMIC_SEQ_CST) == HS_CLIENT_ON)
        return true;
    __atomic_sub_fetch(&hs_client.inflight, 1, __ATOMIC_RELEASE);
    return false;
}

void hs_client_leave(void)
{
    __atomic_sub_fetch(&hs_client.inflight, 1, __ATOMIC_RELEASE);
}

void hs_client_detach(const char *why)
{
    int on = HS_CLIENT_ON;
    if (!__atomic_compare_exchange_n(&hs_client.state, &on, HS_CLIENT_OFF, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_RELAXED))
        return;
    hs_client_publish_fast_limit();
    /* shutdown, not close: another thread may be sending on the descriptor right now, and a
     * closed number could be reused by the program. The next session closes it. */
    shutdown(hs_client.sock, SHUT_RDWR);
    hs_client_injected_off();
    client_log("profiling stopped: %s", why);
}

/* True when the daemon closed its end (or the connection broke). */
static bool daemon_gone(void)
{
    struct pollfd p = {hs_client.sock, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL | POLLIN)) != 0;
}

/* Ends an ON session that the daemon ended (it shut the buffer down or hung up), from any
 * context. Returns true when the client is OFF afterwards. */
static bool drop_ended_session(void)
{
    /* As a writer: a new session in another thread waits before it unmaps the buffer. */
    if (hs_client_enter()) {
        struct hs_rb_stats st;
        hs_rb_get_stats(&hs_client.rb, &st);
        if (st.shutdown)
            hs_client_detach("the profiler daemon ended the session");
        else if (daemon_gone())
            hs_client_detach("the profiler daemon went away");
        hs_client_leave();
    }
    return __atomic_load_n(&hs_client.state, __ATOMIC_SEQ_CST) == HS_CLIENT_OFF;
}

/* The daemon's hang-up raises the profiling signal (the socket's O_ASYNC owner is this
 * process): nothing else ever arrives on the socket after the handshake. */
static void watch_daemon(int sock)
{
    if (g_signal == 0)
        return; /* no handler of ours: the kernel's signal would hit the program */
    struct f_owner_ex owner = {F_OWNER_PID, getpid()};
    if (fcntl(sock, F_SETOWN_EX, &owner) != 0 || fcntl(sock, F_SETSIG, g_signal) != 0)
        return;
    int fl = fcntl(sock, F_GETFL);
    if (fl >= 0)
        fcntl(sock, F_SETFL, fl | O_ASYNC);
}

/* Adaptive sampling: doubles the interval while the buffer is over half full, and halves it
 * back towards the configured one once the daemon has caught up. Each sample carries the
 * interval it was drawn with, so the profile stays unbiased. Returns false when the session
 * ended. */
static bool adapt_interval(void)
{
    uint64_t used = hs_rb_used(&hs_client.rb), size = hs_client.rb.size;
    uint64_t cur = __atomic_load_n(&hs_client.interval, __ATOMIC_RELAXED);
    /* The daemon may ask for a larger interval (its --max-rate for all processes together):
     * taken at once, and never gone below while it stands. */
    uint64_t floor = __atomic_load_n(&hs_client.rb.meta->requested_interval, __ATOMIC_RELAXED);
    if (floor > HS_CLIENT_MAX_REQUESTED_INTERVAL)
        floor = HS_CLIENT_MAX_REQUESTED_INTERVAL;
    if (floor < hs_client.base_interval)
        floor = hs_client.base_interval;
    if (cur < floor) {
        __atomic_store_n(&hs_client.interval, floor, __ATOMIC_RELAXED);
        hs_client_publish_fast_limit();
        cur = floor;
    }
    bool backlog = used > size / 2;
    bool raise = backlog && cur < hs_client.max_interval;
    bool lower = used < size / 8 && cur > floor;
    if (!backlog && !lower)
        return true;
    uint64_t now = hs_client_now_ns();
    uint64_t last = __atomic_load_n(&hs_client.last_adapt_ns, __ATOMIC_RELAXED);
    if (now - last < (backlog ? RAISE_EVERY_NS : LOWER_EVERY_NS) ||
        !__atomic_compare_exchange_n(&hs_client.last_adapt_ns, &last, now, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return true;
    /* A backlog can mean that the daemon died: then nothing drains the buffer any more, and
     * with a raised interval it may take long to fill up. */
    if (backlog && daemon_gone()) {
        hs_client_detach("the profiler daemon went away");
        return false;
    }
    if (!raise && !lower)
        return true;
    uint64_t next = raise ? cur * 2 : cur / 2;
    if (next > hs_client.max_interval)
        next = hs_client.max_interval;
    if (next < floor)
        next = floor;
    __atomic_store_n(&hs_client.interval, next, __ATOMIC_RELAXED);
    hs_client_publish_fast_limit();
    if (raise)
        __atomic_add_fetch(&hs_client.interval_raises, 1, __ATOMIC_RELAXED);
    return true;
}

static void wake_daemon(void)
{
    char byte = 'w';
    ssize_t n = send(hs_client.sock, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        hs_client_detach("the profiler daemon went away");
}

bool hs_client_reserve(size_t len, bool must_deliver, struct hs_rb_reservation *res)
{
    struct hs_rb *rb = &hs_client.rb;
    if ((hs_client.flags & HS_CONFIG_ADAPTIVE) && !adapt_interval())
        return false;
    bool wait = must_deliver || (hs_client.flags & HS_CONFIG_BLOCK_CLIENT);
    uint64_t deadline = 0;
    for (;;) {
        enum hs_rb_status st = hs_rb_reserve(rb, len, res);
        if (st == HS_RB_OK)
            break;
        if (st == HS_RB_FULL || st == HS_RB_LOCK_TIMEOUT) {
            if (!wait)
                return false; /* dropped: counted in the buffer's overflows */
            uint64_t now = hs_client_now_ns();
            if (deadline == 0) {
                deadline = now + hs_client.block_timeout_ns;
            } else if (now >= deadline) {
                hs_client_detach("the profiler's buffer stayed full past the block timeout");
                return false;
            }
            if (daemon_gone()) {
                hs_client_detach("the profiler daemon went away");
                return false;
            }
            struct timespec ts = {0, (long)RETRY_NS};
            nanosleep(&ts, NULL);
            continue;
        }
        if (st == HS_RB_SHUTDOWN)
            hs_client_detach("the profiler daemon ended the session");
        else if (st != HS_RB_TOO_BIG)
            hs_client_detach(hs_rb_status_text(st));
        return false;
    }
    return true;
}

void hs_client_publish(const struct hs_rb_reservation *res)
{
    if (hs_rb_publish(&hs_client.rb, res))
        wake_daemon();
}

bool hs_client_write(size_t len, bool must_deliver, void (*fill)(void *dst, void *arg), void *arg)
{
    struct hs_rb_reservation res;
    if (!hs_client_reserve(len, must_deliver, &res))
        return false;
    fill(res.data, arg);
    hs_client_publish(&res);
    return true;
}

void hs_client_sync_before_unmap(void)
{
    if (!hs_client_on() || hs_client_busy)
        return;
    uint64_t target = 0, deadline = 0;
    bool have_target = false;
    unsigned looks = 0;
    for (;;) {
        /* Entered for each look only: a session that ends meanwhile unmaps the buffer. */
        if (!hs_client_enter())
            return;
        if (!have_target) {
            target = hs_rb_write_pos(&hs_client.rb);
            have_target = true;
        }
        bool read = hs_rb_read_reached(&hs_client.rb, target);
        hs_client_leave();
        if (read)
            return;
        uint64_t now = hs_client_now_ns();
        if (deadline == 0) {
            deadline = now + HS_CLIENT_UNMAP_WAIT_NS;
        } else if (now >= deadline) {
            return;
        } else if (++looks % 50 == 0 && daemon_gone()) {
            /* Every 10 ms: a daemon that died reads nothing, and every dlclose would wait. */
            hs_client_detach("the profiler daemon went away");
            return;
        }
        struct timespec ts = {0, 200000}; /* the daemon looks every 2 ms while records come */
        nanosleep(&ts, NULL);
    }
}

/* ---- Starting a session ------------------------------------------------------------------- */

/* Waits (up to ~100 ms) until no writer uses the previous session's buffer. */
static bool writers_gone(void)
{
    for (int i = 0; i < 1000; i++) {
        if (__atomic_load_n(&hs_client.inflight, __ATOMIC_SEQ_CST) == 0)
            return true;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void forget_session(void)
{
    if (hs_client.sock >= 0)
        close(hs_client.sock);
    hs_client.sock = -1;
    hs_rb_destroy(&hs_client.rb);
}

/* The handshake proper; on failure returns an error text (errno-based ones use buf). */
static const char *handshake(const char *address, char *buf, size_t cap)
{
    int fds[2];
    fds[0] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    fds[1] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fds[0] < 0 || fds[1] < 0) {
        hs_format(buf, cap, "cannot open /proc/self: %s", hs_errno_text(errno));
        if (fds[0] >= 0)
            close(fds[0]);
        if (fds[1] >= 0)
            close(fds[1]);
        return buf;
    }
    int sock = hs_sock_connect(address, HS_HANDSHAKE_TIMEOUT_MS);
    if (sock < 0) {
        hs_format(buf, cap, "cannot connect to the profiler at %s: %s", address,
                  hs_errno_text(errno));
        close(fds[0]);
        close(fds[1]);
        return buf;
    }
    struct hs_hello hello = {HS_HANDSHAKE_MAGIC, HS_HANDSHAKE_VERSION, (int32_t)getpid(), 0,
                             (uint64_t)(uintptr_t)&hs_client_attach};
    int rc = hs_sock_send(sock, &hello, sizeof(hello), fds, 2);
    close(fds[0]);
    close(fds[1]);
    struct hs_config cfg;
    int rb_fd = -1, nfds = 0;
    ssize_t n = rc == 0 ? hs_sock_recv(sock, &cfg, sizeof(cfg), &rb_fd, 1, &nfds) : -1;
    const char *err = NULL;
    if (n < 0) {
        hs_format(buf, cap, "no answer from the profiler at %s: %s", address, hs_errno_text(errno));
        err = buf;
    } else if ((size_t)n != sizeof(cfg) || cfg.magic != HS_HANDSHAKE_MAGIC ||
               cfg.version != HS_HANDSHAKE_VERSION)
        err = "the profiler's answer is not one this client understands";
    else if (!cfg.accepted) {
        cfg.reason[sizeof(cfg.reason) - 1] = '\0';
        hs_format(buf, cap, "the profiler refused this process: %s", cfg.reason);
        err = buf;
    } else if (nfds != 1 || hs_rb_attach(&hs_client.rb, rb_fd) != 0)
        err = "the profiler's shared buffer is unusable";
    else if (cfg.interval == 0 || cfg.max_stack < 256)
        err = "the profiler's configuration is unusable";
    if (rb_fd >= 0)
        close(rb_fd);
    if (err != NULL) {
        hs_rb_destroy(&hs_client.rb);
        close(sock);
        return err;
    }
    hs_client.sock = sock;
    watch_daemon(sock);
    hs_client.flags = cfg.flags;
    hs_client.max_stack = cfg.max_stack;
    hs_client.base_interval = cfg.interval;
    hs_client.max_interval = cfg.max_interval < cfg.interval ? cfg.interval : cfg.max_interval;
    hs_client.block_timeout_ns = cfg.block_timeout_ms * 1000000ull;
    __atomic_store_n(&hs_client.interval, cfg.interval, __ATOMIC_RELAXED);
    return NULL;
}

int hs_client_attach(const char *address)
{
    /* A session the daemon already ended never blocks a new one. */
    if (!drop_ended_session())
        return -1; /* on (a live session), or attaching in another thread */
    int off = HS_CLIENT_OFF;
    if (!__atomic_compare_exchange_n(&hs_client.state, &off, HS_CLIENT_ATTACHING, false,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        return -1; /* on already, or attaching in another thread */
    if (!writers_gone()) {
        __atomic_store_n(&hs_client.state, HS_CLIENT_OFF, __ATOMIC_SEQ_CST);
        client_log("cannot start profiling: a thread is still writing to the last session");
        return -1;
    }
    forget_session();
    hs_sampled_set_init();
    hs_sampled_set_reset();
    char buf[256];
    const char *err = handshake(address, buf, sizeof(buf));
    if (err != NULL) {
        __atomic_store_n(&hs_client.state, HS_CLIENT_OFF, __ATOMIC_SEQ_CST);
        client_log("%s; the program runs unprofiled", err);
        return -1;
    }
    __atomic_store_n(&hs_client.pid, (int)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&hs_client.seq, 0, __ATOMIC_RELAXED);
    hs_client_injected_on();
    __atomic_store_n(&hs_client.state, HS_CLIENT_ON, __ATOMIC_SEQ_CST);
    hs_client_publish_fast_limit();
    /* A hang-up before O_ASYNC was set raised no signal. */
    drop_ended_session();
    hs_client_announce_heaps();
    return 0;
}

/* ---- fork, the signal, start-up ------------------------------------------------------------ */

static void on_fork_child(void)
{
    /* One thread now; the parent's session (its socket, its buffer) is not ours. */
    int was = __atomic_load_n(&hs_client.state, __ATOMIC_RELAXED);
    __atomic_store_n(&hs_client.state, HS_CLIENT_OFF, __ATOMIC_RELAXED);
    __atomic_store_n(&hs_client.fast_limit, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hs_client.inflight, 0, __ATOMIC_RELAXED);
    forget_session();
    hs_client_injected_off();
    if (g_follow && was == HS_CLIENT_ON && g_address[0] != '\0')
        hs_client_attach(g_address);
}

static void on_profile_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    int saved_errno = errno;
    /* From the kernel (positive codes: POLL_IN .. POLL_HUP): the session's socket. */
    if (si->si_code >= POLL_IN && si->si_code <= POLL_HUP) {
        if (si->si_fd == __atomic_load_n(&hs_client.sock, __ATOMIC_RELAXED))
            drop_ended_session();
        errno = saved_errno;
        return;
    }
    char address[ADDRESS_MAX];
    if (si->si_code == SI_QUEUE && si->si_value.sival_int > 0)
        hs_format(address, sizeof(address), "@heapscope-heapprofd.%d", si->si_value.sival_int);
    else if (g_address[0] != '\0')
        memcpy(address, g_address, sizeof(address));
    else
        hs_format(address, sizeof(address), "%s", HS_CLIENT_SYSTEM_SOCKET);
    hs_client_attach(address);
    errno = saved_errno;
}

/* At exit, while the process still exists: gives the daemon up to a second to take what is in
 * the buffer. It may need to read our maps again for those records (a library dlopen'ed since
 * it last did), which it cannot do once we are gone. */
__attribute__((destructor)) static void client_finish(void)
{
    for (int i = 0; i < 1000 && hs_client_on(); i++) {
        if (hs_rb_used(&hs_client.rb) == 0 || daemon_gone())
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static long env_long(const char *name, long fallback)
{
    char buf[32];
    if (hs_env_get(name, buf, sizeof(buf)) <= 0 || (size_t)strlen(buf) >= sizeof(buf))
        return fallback;
    char *end;
    long v = strtol(buf, &end, 10);
    return *end == '\0' ? v : fallback;
}

bool hs_client_arm(void)
{
    static bool armed, ok;
    if (armed)
        return ok;
    armed = true;
    ok = true;
    pthread_atfork(NULL, NULL, on_fork_child);
    long sig = env_long("HEAPSCOPE_PROFILE_SIGNAL", HS_CLIENT_SIGNAL);
    if (sig > 0 && sig < NSIG) {
        /* Never take the signal from a program that handles it itself. */
        struct sigaction old;
        if (sigaction((int)sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
            hs_signal_install((int)sig, on_profile_signal) == 0)
            g_signal = (int)sig;
        else
            ok = false;
    }
    return ok;
}

__attribute__((constructor)) static void client_start(void)
{
    hs_log_init_program();
    /* dlopen'ed by `heapscope profile -p`: heapprofd_client_injected_init arms the client once
     * it has checked the process (injected.c). */
    if (!hs_client_interposes())
        return;
    ssize_t n = hs_env_get("HEAPSCOPE_PROFILE_SOCKET", g_address, sizeof(g_address));
    if (n < 0 || (size_t)n >= sizeof(g_address))
        g_address[0] = '\0';
    g_follow = env_long("HEAPSCOPE_PROFILE_FOLLOW", 0) == 1;
    hs_client_arm();

    long pid = env_long("HEAPSCOPE_PROFILE_PID", 0);
    if (g_address[0] != '\0' && (g_follow || pid == 0 || pid == (long)getpid()))
        hs_client_attach(g_address);
}
