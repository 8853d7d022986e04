-- bench/workers "800 x 16 KB": each request asks for one of 800 files, at random.
local paths = {}
for i = 0, 799 do
    paths[#paths + 1] = "/many/f" .. i .. ".bin"
end
math.randomseed(1)
request = function()
    return wrk.format("GET", paths[math.random(#paths)])
end
