#!/bin/sh
# What the README's main command shows on soft-RoCE (run inside the test VM, where
# veth0 carries rxe0): the devices, then async_watch catching a port going down and
# up and a GID being added and removed, then a clean exit on SIGINT; then the
# rdma_cm echo service with 8 clients of 200 messages each.
#
#   rxe_demo.sh BUILD_DIR
set -eu
build=${1:?usage: rxe_demo.sh BUILD_DIR}

echo "== device_info"
"$build/samples/device_info"

echo "== async_watch (veth0 down, up; address 10.0.0.7 added, removed; then SIGINT)"
"$build/samples/async_watch" &
watcher=$!
sleep 1
ip link set veth0 down
sleep 1
ip link set veth0 up
sleep 1
ip addr add 10.0.0.7/24 dev veth0
sleep 1
ip addr del 10.0.0.7/24 dev veth0
sleep 1
kill -INT "$watcher"
wait "$watcher"
echo "== async_watch exited with status $?"

echo "== echo_server on 10.0.0.1, echo_client with 8 connections x 200 messages"
"$build/samples/echo_server" --address 10.0.0.1 --port 18710 &
server=$!
sleep 1
status=0
"$build/samples/echo_client" --server 10.0.0.1 --port 18710 --connections 8 --messages 200 ||
    status=$?
echo "== echo_client exited with status $status"
kill -TERM "$server"
server_status=0
wait "$server" || server_status=$?
echo "== echo_server exited with status $server_status"
