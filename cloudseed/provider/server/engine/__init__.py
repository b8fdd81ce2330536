"""The server's HTTP/1.1 engine, under the applications and knowing nothing of clouds.

``wire`` parses request heads and frames bodies (no I/O), ``connection`` runs one connection
(keep-alive, pipelining, backpressure) between a transport and a handler, ``transport`` holds the
sockets (listeners and connections on one epoll set), ``tls_listener`` puts a ``Connection`` on
asyncio's TLS transport, ``proxy_protocol`` reads a balancer's PROXY header, ``http`` is what the
applications see (``Request``, ``Response``, ``Handler``), ``access_log`` writes one JSON line per
request. See docs/metadata-server.md, "The HTTP layer".
"""
