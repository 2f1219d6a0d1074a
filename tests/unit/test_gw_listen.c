/* tests/unit/test_gw_listen.c - the listening socket: a port that is taken
 * (by a socket of this test) is refused, not shared; the socket is not
 * SO_REUSEPORT; a wildcard address is recognised (the gateway warns that it
 * is reachable from the network); the open-file limit is raised to the hard
 * limit. Binds 127.0.0.1 only. */
#include <CUnit/CUnit.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "gw_int.h"

static uint16_t bound_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
        return 0;
    return ntohs(sin.sin_port);
}

static void taken_port_is_refused_not_shared(void)
{
    int a = -1, b = -1;
    bool v6 = true;
    /* port 0: the kernel picks a free one */
    CU_ASSERT_EQUAL_FATAL(gw_listen_open("127.0.0.1", 0, &a, &v6) == 0 ? 0 : -1, 0);
    CU_ASSERT_FALSE(v6);
    uint16_t port = bound_port(a);
    CU_ASSERT_NOT_EQUAL(port, 0);
    int on = 1;
    socklen_t len = sizeof on;
    CU_ASSERT_EQUAL(getsockopt(a, SOL_SOCKET, SO_REUSEPORT, &on, &len), 0);
    CU_ASSERT_EQUAL(on, 0);   /* never shared with a second gateway */
    CU_ASSERT_EQUAL(gw_listen_open("127.0.0.1", port, &b, &v6), -1);
    CU_ASSERT_EQUAL(gw_listen_open("localhost", port, &b, &v6), -1);
    close(a);
    /* free again: binds (SO_REUSEADDR: no wait for TIME_WAIT) */
    CU_ASSERT_EQUAL(gw_listen_open("127.0.0.1", port, &b, &v6), 0);
    if (b >= 0)
        close(b);
}

static void wildcard_addresses_are_recognised(void)
{
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    s4.sin_addr.s_addr = htonl(INADDR_ANY);
    CU_ASSERT_TRUE(gw_addr_is_any((struct sockaddr *)&s4));
    s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FALSE(gw_addr_is_any((struct sockaddr *)&s4));
    struct sockaddr_in6 s6;
    memset(&s6, 0, sizeof s6);
    s6.sin6_family = AF_INET6;
    s6.sin6_addr = in6addr_any;
    CU_ASSERT_TRUE(gw_addr_is_any((struct sockaddr *)&s6));
    s6.sin6_addr = in6addr_loopback;
    CU_ASSERT_FALSE(gw_addr_is_any((struct sockaddr *)&s6));
}

static void fd_limit_is_raised_to_the_hard_limit(void)
{
    struct rlimit rl;
    CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max > 64) {
        struct rlimit low = { 64, rl.rlim_max };
        CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
        uint64_t before = 0, now = gw_fd_limit_raise(&before);
        CU_ASSERT_EQUAL(before, 64);
        CU_ASSERT_EQUAL(now, rl.rlim_max);
        struct rlimit after;
        getrlimit(RLIMIT_NOFILE, &after);
        CU_ASSERT_EQUAL(after.rlim_cur, rl.rlim_max);
    }
    setrlimit(RLIMIT_NOFILE, &rl);
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("gw_listen", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "taken_port_is_refused_not_shared", taken_port_is_refused_not_shared);
    CU_add_test(s, "wildcard_addresses_are_recognised", wildcard_addresses_are_recognised);
    CU_add_test(s, "fd_limit_is_raised_to_the_hard_limit", fd_limit_is_raised_to_the_hard_limit);
    return 0;
}
