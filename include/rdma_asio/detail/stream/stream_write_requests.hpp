// The requests of a stream's sends and RDMA writes (its hello, data, credit
// records, the end), and how many of them are posted and not completed yet.
// A request is made the first time one is needed and reused after its completion:
// their number is bounded by the peer's notification receives, so new ones are
// made only while the stream warms up. The count is what close() waits for
// before the connection goes (a posted write's memory is the stream's until its
// completion).
#pragma once

#include "rdma_asio/detail/stream/stream_work_request.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace rdma_asio::detail {

template <class Core>
class stream_write_requests {
public:
    using request = stream_work_request<Core>;

    /// An idle request, for the caller to start (std::bad_alloc when a new one
    /// cannot be made).
    request& idle() {
        if (request* r = free_) {
            free_ = r->next_free;
            return *r;
        }
        all_.push_back(std::make_unique<request>());
        return *all_.back();
    }
    /// `r` (from idle(), may be null) is idle again: it completed, or was never
    /// started.
    void release(request* r) noexcept {
        if (r != nullptr) {
            r->next_free = free_;
            free_ = r;
        }
    }

    /// A request was posted; one completed.
    void posted() noexcept { ++posted_; }
    void completed() noexcept {
        if (posted_ > 0)
            --posted_;
    }
    /// Posted and not completed.
    std::uint32_t in_flight() const noexcept { return posted_; }

private:
    std::vector<std::unique_ptr<request>> all_;
    request* free_ = nullptr;
    std::uint32_t posted_ = 0;
};

} // namespace rdma_asio::detail
