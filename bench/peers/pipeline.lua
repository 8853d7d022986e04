-- wrk script: sends requests 16 at a time on each connection (HTTP/1.1 pipelining).
-- The path is wrk's URL path; wrk counts each response.
local depth = 16
init = function(args)
   local requests = {}
   for i = 1, depth do
      requests[i] = wrk.format()
   end
   pipelined = table.concat(requests)
end
request = function()
   return pipelined
end
