#include "cm_steps.hpp"

#include <rdma_asio/error.hpp>

#include <cerrno>
#include <cstdio>

namespace sample {

asio::awaitable<void> take_requests(rdma_asio::cm_id& listener,
                                    std::function<void(rdma_asio::cm_id)> start) {
    for (;;) {
        auto [ec, request] =
            co_await listener.async_get_request(asio::experimental::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return; // stopping: the listener is closed
        if (ec) {
            std::printf("connection request: %s\n", ec.message().c_str());
            continue;
        }
        start(std::move(request));
    }
}

asio::awaitable<rdma_asio::cm_event> connect_for_private_data(rdma_asio::cm_id& id,
                                                              const rdma_conn_param& param) {
    errno = 0;
    if (rdma_connect(id.native_handle(), const_cast<rdma_conn_param*>(&param)) != 0)
        throw rdma_asio::system_error(errno, asio::error::get_system_category(), "rdma_connect");
    rdma_asio::cm_event ev = co_await id.async_next(asio::use_awaitable);
    if (rdma_asio::error_code ec = rdma_asio::error_of(ev, RDMA_CM_EVENT_ESTABLISHED))
        throw rdma_asio::system_error(ec, "rdma_connect");
    co_return ev;
}

} // namespace sample
