/* inject_busy_alloc.c: the child of test_process_inject's "allocator replaced" case, run with
 * inject_allocator.so preloaded: one thread that only ever mallocs and frees, so it is nearly
 * always inside the allocator holding its lock (a second thread would spend half its time
 * waiting for the lock instead), and a '.' on stdout every 20,000 rounds, so that the test
 * sees it still makes progress. */
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    for (unsigned long n = 1;; n++) {
        void *volatile p = malloc(64);
        free(p);
        if (n % 20000 == 0 && write(1, ".", 1) != 1)
            return 3;
    }
}
