-- IMDSv2 hop limit behind haproxy (docs/metadata-server.md, "Deployment").
--
-- A token reply must reach the instance with the IP TTL of its hop limit, so that it dies on the
-- way to anything further away (a container behind NAT, a forwarded request). Behind a balancer
-- the server's own socket carries the reply only to haproxy, so the server names the TTL in a
-- Cloudseed-Hop-Limit header instead. This action removes the header and marks the client
-- connection's packets 0x43530000 + TTL; cloudseed-hop-limit.nft gives marked packets that TTL.
-- The next reply on the same connection clears the mark.
core.register_action("cloudseed_hop_limit", { "http-res" }, function(txn)
    local headers = txn.http:res_get_headers()
    local asked = headers["cloudseed-hop-limit"]
    if asked ~= nil then
        txn.http:res_del_header("cloudseed-hop-limit")
        local ttl = tonumber(asked[0])
        if ttl ~= nil and ttl >= 1 and ttl <= 64 then
            txn:set_mark(0x43530000 + ttl)
            txn:set_var("sess.cloudseed_marked", 1)
            return
        end
    end
    if txn:get_var("sess.cloudseed_marked") ~= nil then
        txn:set_mark(0)
        txn:unset_var("sess.cloudseed_marked")
    end
end)
