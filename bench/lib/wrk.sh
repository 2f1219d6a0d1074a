# bench/lib/wrk.sh - what engines.sh and hitpath.sh share to measure a hit
# case with wrk; sourced, needs $root (the repository) and $secs.

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime, clock ticks

# wrk_case CASE CONNS PORT BIG_PATH: wrk -t2 for $secs s at CONNS connections
# against 127.0.0.1:PORT, the small and mid cases through their script in
# bench/lib, the big one as GETs of BIG_PATH; prints wrk's report.
wrk_case() {
    local url="http://127.0.0.1:$3$4" args=(-t2 "-c$2" "-d${secs}s")
    if [ "$1" != big ]; then
        args+=(-s "$root/bench/lib/$1.lua")
        url="http://127.0.0.1:$3"
    fi
    wrk "${args[@]}" "$url"
}
