-- bench/lib/mid.lua - wrk script for engines.sh and hitpath.sh: GETs the
-- 20 mid-size objects /bench/mid-0..19 round-robin.
local i = 0
request = function() i = (i + 1) % 20; return wrk.format("GET", "/bench/mid-" .. i) end
