#!/bin/sh
# The TCP original of docs/from-tcp.md's Beast HTTP server, on the host's loopback:
# http_server_async_tcp serves, a client (Python's http.client) GETs two targets on
# one kept-alive connection and checks each body, and a POST gets 400. The RDMA
# form gets the same GETs on rxe (rxe.sample.http_server_async).
#
#   http_tcp_test.sh SERVE_THEN_RUN HTTP_SERVER_ASYNC_TCP PORT
set -u
runner=${1:?usage: http_tcp_test.sh SERVE_THEN_RUN HTTP_SERVER_ASYNC_TCP PORT}
server=${2:?} port=${3:?}
out=$(timeout 120 "$runner" listening "$server -a 127.0.0.1 -p $port" python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
for target in ("/one", "/two/three"):
    c.request("GET", target)
    r = c.getresponse()
    body = r.read().decode()
    if r.status != 200 or body != target + "\n":
        sys.exit(f"GET {target}: {r.status} {body!r}")
    print(body, end="")
c.request("POST", "/x", body="y")
r = c.getresponse()
r.read()
if r.status != 400:
    sys.exit(f"POST: {r.status}, not 400")
' "$port" 2>&1)
status=$?
[ $status = 0 ] || { echo "FAILED: status $status"; echo "$out"; exit 1; }
expected=$(printf '/one\n/two/three\nserver: listening on 127.0.0.1 port %s' "$port")
[ "$out" = "$expected" ] || { echo "FAILED: output differs:"; echo "$out"; exit 1; }
echo "ok: GETs answered and a POST refused over TCP"
