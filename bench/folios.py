#!/usr/bin/env python3
"""How a file sits in the page cache: its pages and the folios holding them.

  python3 bench/folios.py FILE...      (root: it reads /proc/kpageflags)

Maps each file, touches every page (so pages not cached yet are read in, by
the kernel's fault path), and looks up each page's frame in
/proc/self/pagemap and its flags in /proc/kpageflags: a large folio is a
compound head with tail pages, an order-0 folio is a page on its own. Fewer
folios per MiB means less work for sendfile's page-cache walk
(filemap_get_read_batch). Used for bench/results/fills-ab-small-buffered.md:
a file read back after an O_DIRECT write is cached mostly a page at a time,
one written with a single buffered write as one folio."""
import mmap
import os
import struct
import sys

KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL = 15, 16
PAGE = 4096


def folios(path):
    """(pages, large folios, order-0 pages) of path as cached now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    npages = (size + PAGE - 1) // PAGE
    for i in range(npages):
        m[i * PAGE]   # fault it in
    real = os.path.realpath(path)
    base = None
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith(" " + real):
                base = int(line.split("-")[0], 16)
                break
    heads = small = 0
    with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
        for i in range(npages):
            pm.seek((base // PAGE + i) * 8)
            e = struct.unpack("<Q", pm.read(8))[0]
            if not e >> 63 & 1:
                continue
            kf.seek((e & ((1 << 55) - 1)) * 8)
            fl = struct.unpack("<Q", kf.read(8))[0]
            if fl >> KPF_COMPOUND_HEAD & 1:
                heads += 1
            elif not fl >> KPF_COMPOUND_TAIL & 1:
                small += 1
    m.close()
    return npages, heads, small


def main():
    for p in sys.argv[1:]:
        n, heads, small = folios(p)
        print("%s: %d pages in %d folios (%d large, %d single pages)" % (p, n, heads + small,
                                                                        heads, small))


if __name__ == "__main__":
    main()
