// The accept and the connect into a stream of the default executor type, compiled
// once here for every program (stream_open_start.hpp says why).
#include "rdma_asio/detail/stream/stream_open_start.hpp"

#include <new>

namespace rdma_asio::detail {

stream_core* stream_prepare::renew() noexcept {
    try {
        *into_ = std::make_shared<stream_core>(ex_, options_);
    } catch (const std::bad_alloc&) {
        into_->reset(); // the stream's operation fails with ENOMEM
        return nullptr;
    }
    return into_->get();
}

template struct stream_connect_start<asio::any_io_executor>;
template struct stream_accept_start<asio::any_io_executor>;

} // namespace rdma_asio::detail
