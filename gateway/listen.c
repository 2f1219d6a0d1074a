/* gateway/listen.c - the listening socket and the descriptor budget. The
 * gateway binds its socket itself and hands it to libmicrohttpd
 * (MHD_OPTION_LISTEN_SOCKET): a port already taken is refused with the
 * address and the reason, and never shared. No SO_REUSEPORT, which let a
 * second gateway on the same port split the requests with the first;
 * SO_REUSEADDR stays, so that the last run's connections in TIME_WAIT do not
 * block a restart. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "gw_int.h"

void gw_listen_name(const char *host, uint16_t port, char *buf, size_t len)
{
    snprintf(buf, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
}

/* What to do about a bind() that failed with e. */
static const char *bind_hint(int e)
{
    switch (e) {
    case EADDRINUSE:
        return " (another shardgate or another program holds this port: stop it or choose "
               "another port with --listen)";
    case EACCES:
        return " (ports below 1024 need root or CAP_NET_BIND_SERVICE)";
    case EADDRNOTAVAIL:
        return " (no interface of this machine has that address)";
    default:
        return "";
    }
}

bool gw_addr_is_any(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr ==
               htonl(INADDR_ANY);
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return memcmp(a6, &in6addr_any, sizeof *a6) == 0;
}

int gw_listen_open(const char *host, uint16_t port, int *fd_out, bool *ipv6_out)
{
    char given[300], num[INET6_ADDRSTRLEN], ps[8];
    gw_listen_name(host, port, given, sizeof given);
    snprintf(ps, sizeof ps, "%u", (unsigned)port);

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "gw", "cannot listen on %s: cannot resolve \"%s\": %s", given,
                host, rc == EAI_SYSTEM ? strerror(e) : gai_strerror(rc));
        return -1;
    }
    /* A name with both families ("localhost"): IPv4, which every client
     * tries; an IPv6 literal resolves to itself alone. */
    const struct addrinfo *ai = NULL;
    for (const struct addrinfo *p = res; p && !ai; p = p->ai_next)
        if (p->ai_family == AF_INET)
            ai = p;
    for (const struct addrinfo *p = res; p && !ai; p = p->ai_next)
        if (p->ai_family == AF_INET6)
            ai = p;
    if (!ai) {
        log_msg(LOG_LVL_ERROR, "gw", "cannot listen on %s: \"%s\" has no IPv4 or IPv6 address",
                given, host);
        freeaddrinfo(res);
        return -1;
    }
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, num, sizeof num, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(num, sizeof num, "?");
    char shown[400];   /* "localhost:9000 (127.0.0.1)" when a name was resolved */
    if (strcmp(num, host) == 0)
        snprintf(shown, sizeof shown, "%s", given);
    else
        snprintf(shown, sizeof shown, "%s (%s)", given, num);

    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "gw", "cannot listen on %s: socket: %s", shown, strerror(e));
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        int e = errno;
        log_msg(LOG_LVL_WARN, "gw", "listen socket: SO_REUSEADDR: %s (a restart may have to "
                "wait for old connections)", strerror(e));
    }
    /* The kernel caps the backlog at net.core.somaxconn. */
    bool bound = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!bound || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "gw", "cannot listen on %s: %s%s%s", shown,
                bound ? "listen: " : "", strerror(e), bind_hint(e));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    if (gw_addr_is_any(ai->ai_addr))
        log_msg(LOG_LVL_WARN, "gw", "listening on every interface (%s): the gateway is reachable "
                "from the network; --listen 127.0.0.1:%u keeps it on this machine", shown,
                (unsigned)port);
    else if (strcmp(num, host) != 0)
        log_msg(LOG_LVL_INFO, "gw", "listening on %s", shown);
    *ipv6_out = ai->ai_family == AF_INET6;
    *fd_out = fd;
    freeaddrinfo(res);
    return 0;
}

/* Linux refuses a soft limit above fs.nr_open even when the hard limit is
 * "unlimited". */
static rlim_t nr_open(void)
{
    rlim_t v = 1u << 20;
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    if (f) {
        unsigned long long n;
        if (fscanf(f, "%llu", &n) == 1 && n > 0)
            v = (rlim_t)n;
        fclose(f);
    }
    return v;
}

uint64_t gw_fd_limit_raise(uint64_t *before)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        *before = 1024;
        return 1024;
    }
    *before = rl.rlim_cur;
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit nl = { want, rl.rlim_max };
        if (setrlimit(RLIMIT_NOFILE, &nl) == 0) {
            rl.rlim_cur = want;
        } else {
            int e = errno;
            log_msg(LOG_LVL_WARN, "gw", "cannot raise the open-file limit from %llu to %llu: %s",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)want, strerror(e));
        }
    }
    return rl.rlim_cur == RLIM_INFINITY ? (uint64_t)nr_open() : (uint64_t)rl.rlim_cur;
}
