// A blocking read on a stream, as a TCP program calls socket.read_some: refused at
// compile time, the one diagnostic pointing at the line that says what to use
// (unit.compile_error.stream_blocking_read).
#include <rdma_asio/stream.hpp>

std::size_t read_blocking(rdma_asio::stream& s, rdma_asio::asio::mutable_buffer b) {
    return s.read_some(b);
}
