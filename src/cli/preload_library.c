/* preload_library.c: checking a library before a system file makes every program load it
 * (/etc/ld.so.preload, a systemd drop-in's LD_PRELOAD). A line naming a missing file makes
 * the loader print an error in every program started; a library of the wrong class or
 * machine, or one that does not load, the same. So the file must be there, be an ELF shared
 * object of this machine's class and architecture (those of this command's own executable),
 * and, when it is the library this machine will load, actually load: a child runs this
 * command (`--version`) with it in LD_PRELOAD, and the loader must say nothing.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first bytes of an ELF header: identification, type and machine (the same offsets in
 * both classes). */
struct elf_start {
    unsigned char ident[EI_NIDENT];
    uint16_t type, machine;
};

static int read_elf_start(const char *path, struct elf_start *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, h, sizeof(*h));
    close(fd);
    if (n != (ssize_t)sizeof(*h)) {
        memset(h, 0, sizeof(*h));
        return 0;
    }
    return 0;
}

/* Runs `/proc/self/exe --version` with lib preloaded; true when it exits 0 and nothing was
 * said on stderr (the loader reports a library it cannot preload there, and goes on). */
static bool loads(const char *command, const char *lib)
{
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0)
        return false;
    pid_t pid = fork();
    if (pid < 0) {
        close(err_pipe[0]);
        close(err_pipe[1]);
        return false;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(err_pipe[1], 2);
        char preload[4200];
        snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib);
        /* An empty option string: the shim stays a pass-through and reads no setting. */
        char *env[] = {preload, "LIBC_DEBUG_MALLOC_OPTIONS=", NULL};
        char *argv[] = {"heapscope", "--version", NULL};
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    close(err_pipe[1]);
    char said[1024];
    size_t got = 0;
    ssize_t n;
    while ((n = read(err_pipe[0], said + got, sizeof(said) - 1 - got)) > 0 ||
           (n < 0 && errno == EINTR))
        got += n > 0 ? (size_t)n : 0;
    close(err_pipe[0]);
    said[got] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == 0;
    if (ok)
        return true;
    char how[128];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof(how), ": a program preloading it died of signal %d (%s)",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) != 0)
        snprintf(how, sizeof(how), ": a program preloading it exited with status %d",
                 WEXITSTATUS(status));
    else
        how[0] = '\0';
    fprintf(stderr, "heapscope %s: %s does not load in a program%s%s%s", command, lib, how,
            got ? "; the loader said:\n  " : "\n", said);
    if (got && said[got - 1] != '\n')
        fputc('\n', stderr);
    return ok;
}

bool hs_check_preload_library(const char *command, const char *path, const char *shown,
                              bool try_load)
{
    struct stat st;
    int found = stat(path, &st) == 0 ? 0 : errno;
    if (found != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "heapscope %s: refusing: the library %s is not there (%s)\n", command,
                shown, found ? strerror(found) : "not a regular file");
        return false;
    }
    struct elf_start lib, self;
    if (read_elf_start(path, &lib) != 0) {
        fprintf(stderr, "heapscope %s: refusing: cannot read %s: %s\n", command, shown,
                strerror(errno));
        return false;
    }
    if (read_elf_start("/proc/self/exe", &self) != 0)
        memset(&self, 0, sizeof(self));
    const char *wrong = NULL;
    if (memcmp(lib.ident, ELFMAG, SELFMAG) != 0)
        wrong = "is not an ELF file";
    else if (lib.type != ET_DYN)
        wrong = "is not a shared library";
    else if (lib.ident[EI_CLASS] != self.ident[EI_CLASS])
        wrong = lib.ident[EI_CLASS] == ELFCLASS32 ? "is a 32-bit library; this machine's "
                                                    "programs are 64-bit"
                                                  : "is not of this machine's ELF class";
    else if (lib.ident[EI_DATA] != self.ident[EI_DATA] || lib.machine != self.machine)
        wrong = "is built for another architecture";
    if (wrong) {
        fprintf(stderr, "heapscope %s: refusing: %s %s\n", command, shown, wrong);
        return false;
    }
    if (try_load && !loads(command, path)) {
        fprintf(stderr, "heapscope %s: refusing to preload it\n", command);
        return false;
    }
    return true;
}
