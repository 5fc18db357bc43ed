/* unix_socket.c: UNIX sockets with descriptor passing (see unix_socket.h). */
#include "unix_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* Fills *sa from address; returns the address length, or -1 (ENAMETOOLONG, EINVAL). */
static int make_address(const char *address, struct sockaddr_un *sa, socklen_t *len)
{
    size_t n = strlen(address);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (n == 0 || (address[0] == '@' && n == 1)) {
        errno = EINVAL;
        return -1;
    }
    if (n >= sizeof(sa->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa->sun_path, address, n);
    if (address[0] == '@') {
        sa->sun_path[0] = '\0'; /* abstract: the name is the bytes after the NUL */
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    return 0;
}

int hs_sock_set_timeout(int sock, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
        return -1;
    return 0;
}

int hs_sock_connect(const char *address, int timeout_ms)
{
    struct sockaddr_un sa;
    socklen_t len;
    if (make_address(address, &sa, &len) != 0)
        return -1;
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    if (hs_sock_set_timeout(sock, timeout_ms) != 0 ||
        connect(sock, (struct sockaddr *)&sa, len) != 0) {
        int err = errno;
        close(sock);
        errno = err;
        return -1;
    }
    return sock;
}

int hs_sock_listen(const char *address)
{
    struct sockaddr_un sa;
    socklen_t len;
    if (make_address(address, &sa, &len) != 0)
        return -1;
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0)
        return -1;
    if (address[0] != '@')
        unlink(address);
    if (bind(sock, (struct sockaddr *)&sa, len) != 0 || listen(sock, 64) != 0) {
        int err = errno;
        close(sock);
        errno = err;
        return -1;
    }
    return sock;
}

int hs_sock_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    if (nfds < 0 || nfds > HS_SOCK_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    union {
        char buf[CMSG_SPACE(sizeof(int) * HS_SOCK_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if ((size_t)n != len) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

ssize_t hs_sock_recv(int sock, void *buf, size_t len, int *fds, int max_fds, int *nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * HS_SOCK_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    *nfds = 0;
    ssize_t n;
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*nfds < max_fds)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    return n;
}
