#!/usr/bin/python3
"""tests/integration/seccomp_exec.py - runs a program with io_uring blocked the
way Docker's default seccomp profile (Engine >= 25) and many Kubernetes
runtimes block it: io_uring_setup, io_uring_enter and io_uring_register
answer EPERM; every other system call is allowed. The filter is loaded into
this process and kept across exec (libseccomp sets no_new_privs).

    /usr/bin/python3 seccomp_exec.py PROGRAM [ARGS...]

Needs Debian's python3-seccomp (a module of /usr/bin/python3, not pip's).
Exit 77 when it is missing, 127 when PROGRAM cannot be run."""

import errno
import os
import sys

SYSCALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    try:
        import seccomp
    except ImportError as e:
        sys.stderr.write("seccomp_exec: python3-seccomp missing: %s\n" % e)
        return 77
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in SYSCALLS:
        f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    f.load()
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    except OSError as e:
        sys.stderr.write("seccomp_exec: cannot run %s: %s\n" % (sys.argv[1], e))
        return 127


if __name__ == "__main__":
    sys.exit(main())
