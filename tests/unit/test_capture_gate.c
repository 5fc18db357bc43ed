/* test_capture_gate.c: the fork gate of stack capture (capture_gate.h).
 *
 * Each case forks with the gate's handlers registered as the shim registers them, and checks
 * what the child and the parent see:
 *  - a fork waits for a capture in flight in another thread (the child sees its end);
 *  - a capture that starts while a fork is in progress waits for the parent handler, and the
 *    forking thread's own captures (from a later prepare handler) pass;
 *  - fork() from a signal handler that interrupted a capture of its own thread does not wait
 *    for itself, and its child captures;
 *  - a capture in a signal handler that interrupted a capture of the same thread while
 *    another thread forks returns no frames at once (the fork waits for the interrupted one);
 *  - a capture that never ends: the fork goes ahead after HS_CAPTURE_GATE_DRAIN_MS and the
 *    child, and its own children, capture nothing; the parent still does;
 *  - two threads forking at once while others capture: every child captures.
 * A hang fails the test through alarm() (SIGALRM's default action ends the process).
 */
#define _GNU_SOURCE
#include "backtrace.h"
#include "capture_gate.h"
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static size_t capture_now(void)
{
    uintptr_t frames[16];
    return hs_backtrace_capture(frames, 16, 0);
}

/* Waits for a child; returns its exit status, or -1 if it did not exit normally. */
static int child_status(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Child exit status for "captures work here": 0 if so, 1 if they are off, 2 if a capture
 * found no frames although they are on. */
static int child_capture_code(void)
{
    if (hs_capture_gate_is_off())
        return 1;
    return capture_now() > 0 ? 0 : 2;
}

/* ---- a fork waits for a capture in flight ---- */

static atomic_int g_entered;
static int g_capture_finished; /* plain: the child reads its copy */

static void *slow_capture(void *arg)
{
    (void)arg;
    if (!hs_capture_gate_enter())
        return NULL;
    atomic_store(&g_entered, 1);
    sleep_ms(200); /* "inside a capture" for a while */
    g_capture_finished = 1;
    hs_capture_gate_leave();
    return NULL;
}

static void test_fork_waits_for_capture_in_flight(void)
{
    check_context("fork waits for a capture in flight");
    pthread_t t;
    pthread_create(&t, NULL, slow_capture, NULL);
    while (!atomic_load(&g_entered))
        sleep_ms(1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(g_capture_finished == 1 ? child_capture_code() : 3);
    CHECK_EQ(child_status(pid), 0);
    pthread_join(t, NULL);
}

/* ---- captures during a fork ---- */

/* Set while a test wants the prepare handler below to act. */
static atomic_int g_probe_fork;
static atomic_int g_late_done;
static int g_late_done_during_fork = -1;
static size_t g_owner_frames;

static void *late_capture(void *arg)
{
    (void)arg;
    capture_now();
    atomic_store(&g_late_done, 1);
    return NULL;
}

/* Registered before the gate's handlers, so it runs after the gate has closed. */
static pthread_t g_late;
static void probe_prepare(void)
{
    if (!atomic_load(&g_probe_fork))
        return;
    g_owner_frames = capture_now(); /* the forking thread itself: must pass */
    pthread_create(&g_late, NULL, late_capture, NULL);
    sleep_ms(100);
    g_late_done_during_fork = atomic_load(&g_late_done);
}

static void test_capture_during_fork_waits(void)
{
    check_context("a capture that starts during a fork waits; the forker's own pass");
    atomic_store(&g_probe_fork, 1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_capture_code());
    atomic_store(&g_probe_fork, 0);
    CHECK(g_owner_frames > 0);
    CHECK_EQ(g_late_done_during_fork, 0);
    pthread_join(g_late, NULL);
    CHECK_EQ(atomic_load(&g_late_done), 1);
    CHECK_EQ(child_status(pid), 0);
}

/* ---- fork from a signal handler that interrupted a capture ---- */

static int g_handler_child_code = -1;

static void fork_in_handler(int sig)
{
    (void)sig;
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_capture_code());
    g_handler_child_code = child_status(pid);
}

static void test_fork_from_handler_inside_capture(void)
{
    check_context("fork from a signal handler inside a capture of the same thread");
    signal(SIGUSR1, fork_in_handler);
    CHECK(hs_capture_gate_enter());
    raise(SIGUSR1);
    hs_capture_gate_leave();
    signal(SIGUSR1, SIG_DFL);
    CHECK_EQ(g_handler_child_code, 0);
}

/* ---- nested capture at a closed gate ---- */

static pthread_t g_capturer;
static atomic_int g_capturer_state; /* 1 inside its capture, 2 signal handled, 3 left */
static size_t g_nested_frames = 99;

static void capture_in_handler(int sig)
{
    (void)sig;
    g_nested_frames = capture_now();
    atomic_store(&g_capturer_state, 2);
}

static void *outer_capture(void *arg)
{
    (void)arg;
    if (!hs_capture_gate_enter())
        return NULL;
    atomic_store(&g_capturer_state, 1);
    while (atomic_load(&g_capturer_state) != 2)
        sleep_ms(1);
    hs_capture_gate_leave();
    atomic_store(&g_capturer_state, 3);
    return NULL;
}

/* Signals the capturer once a fork has closed the gate (the fork then waits for it). */
static void *signal_when_closed(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&hs_capture_gate.state, __ATOMIC_ACQUIRE) != HS_CAPTURE_GATE_CLOSED)
        sched_yield();
    pthread_kill(g_capturer, SIGUSR2);
    return NULL;
}

static void test_nested_capture_at_closed_gate(void)
{
    check_context("a capture nested in a capture returns nothing while the gate is closed");
    signal(SIGUSR2, capture_in_handler);
    pthread_create(&g_capturer, NULL, outer_capture, NULL);
    while (atomic_load(&g_capturer_state) != 1)
        sleep_ms(1);
    pthread_t signaller;
    pthread_create(&signaller, NULL, signal_when_closed, NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_capture_code());
    CHECK_EQ(child_status(pid), 0);
    pthread_join(signaller, NULL);
    pthread_join(g_capturer, NULL);
    CHECK_EQ(g_nested_frames, 0);
    CHECK_EQ(atomic_load(&g_capturer_state), 3);
    signal(SIGUSR2, SIG_DFL);
    CHECK(capture_now() > 0);
}

/* ---- a capture that never ends ---- */

static atomic_int g_stuck_state; /* 1 entered, 2 may leave */

static void *stuck_capture(void *arg)
{
    (void)arg;
    if (!hs_capture_gate_enter())
        return NULL;
    atomic_store(&g_stuck_state, 1);
    while (atomic_load(&g_stuck_state) != 2)
        sleep_ms(5);
    hs_capture_gate_leave();
    return NULL;
}

static void test_capture_that_never_ends(void)
{
    check_context("a capture that does not end: the child captures nothing, nor its children");
    pthread_t t;
    pthread_create(&t, NULL, stuck_capture, NULL);
    while (atomic_load(&g_stuck_state) != 1)
        sleep_ms(1);
    pid_t pid = fork();
    if (pid == 0) {
        int code = hs_capture_gate_is_off() && capture_now() == 0 ? 0 : 1;
        pid_t grandchild = fork();
        if (grandchild == 0)
            _exit(hs_capture_gate_is_off() && capture_now() == 0 ? 0 : 1);
        if (child_status(grandchild) != 0)
            code |= 2;
        _exit(code);
    }
    CHECK_EQ(child_status(pid), 0);
    CHECK(!hs_capture_gate_is_off());
    CHECK(capture_now() > 0);
    atomic_store(&g_stuck_state, 2);
    pthread_join(t, NULL);
    pid = fork();
    if (pid == 0)
        _exit(child_capture_code());
    CHECK_EQ(child_status(pid), 0);
}

/* ---- concurrent forks under load ---- */

#define FORKERS 2
#define FORKS_EACH 25
#define CAPTURERS 2

static atomic_int g_stop_capturing;
static atomic_int g_bad_children;

static void *keep_capturing(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop_capturing))
        capture_now();
    return NULL;
}

static void *keep_forking(void *arg)
{
    (void)arg;
    for (int i = 0; i < FORKS_EACH; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(child_capture_code());
        if (child_status(pid) != 0)
            atomic_fetch_add(&g_bad_children, 1);
    }
    return NULL;
}

static void test_concurrent_forks_under_load(void)
{
    check_context("two threads forking while two capture");
    pthread_t capturers[CAPTURERS], forkers[FORKERS];
    for (int i = 0; i < CAPTURERS; i++)
        pthread_create(&capturers[i], NULL, keep_capturing, NULL);
    for (int i = 0; i < FORKERS; i++)
        pthread_create(&forkers[i], NULL, keep_forking, NULL);
    for (int i = 0; i < FORKERS; i++)
        pthread_join(forkers[i], NULL);
    atomic_store(&g_stop_capturing, 1);
    for (int i = 0; i < CAPTURERS; i++)
        pthread_join(capturers[i], NULL);
    CHECK_EQ(atomic_load(&g_bad_children), 0);
    CHECK_EQ(__atomic_load_n(&hs_capture_gate.state, __ATOMIC_ACQUIRE), HS_CAPTURE_GATE_OPEN);
}

int main(void)
{
    alarm(120);
    /* As the shim does, after a handler of its own whose prepare runs later. */
    pthread_atfork(probe_prepare, NULL, NULL);
    pthread_atfork(hs_capture_gate_fork_prepare, hs_capture_gate_fork_parent,
                   hs_capture_gate_fork_child);
    CHECK(capture_now() > 0);
    test_fork_waits_for_capture_in_flight();
    test_capture_during_fork_waits();
    test_fork_from_handler_inside_capture();
    test_nested_capture_at_closed_gate();
    test_capture_that_never_ends();
    test_concurrent_forks_under_load();
    return check_report();
}
