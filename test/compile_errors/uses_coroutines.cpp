// A first program's includes and one coroutine, compiled without the flags it
// needs by one_compile_error.sh: the library must answer with one error naming
// the flag, not with a page of errors from its own headers and Asio's.
#include <rdma_asio/asio.hpp>
#include <rdma_asio/queue_pair.hpp>

asio::awaitable<void> nothing() {
    co_return;
}

int main() {}
