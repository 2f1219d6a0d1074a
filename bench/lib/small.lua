-- bench/lib/small.lua - wrk script for engines.sh and hitpath.sh: GETs the
-- 200 small objects /bench/small-0..199 round-robin.
local i = 0
request = function() i = (i + 1) % 200; return wrk.format("GET", "/bench/small-" .. i) end
