// What a subnet_event_client did: its counters.
#pragma once

#include <cstdint>

namespace rdma_asio {

/// The counters of a subnet_event_client (see subnet_event_client::counters()),
/// a snapshot readable from any thread.
struct subnet_event_client_counters {
    std::uint64_t requests = 0;          ///< InformInfo Sets sent, first tries
    std::uint64_t retries = 0;           ///< the same Sets sent again after a timeout
    std::uint64_t timeouts = 0;          ///< requests given up after the last retry
    std::uint64_t refusals = 0;          ///< answers with a non-zero MAD status
    std::uint64_t reports = 0;           ///< Reports received and answered
    std::uint64_t duplicate_reports = 0; ///< Reports with a TID seen before (SA retries)
    std::uint64_t events = 0;            ///< subnet events delivered
    std::uint64_t filtered = 0;          ///< Reports about GIDs nobody registered
    std::uint64_t malformed = 0;         ///< MADs that could not be decoded
    std::uint64_t resubscriptions = 0;   ///< re-subscriptions (SM change, reregister)
};

} // namespace rdma_asio
