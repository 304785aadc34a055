// Events handed to a waiter whose handler has not run yet, kept reachable so that
// retiring their object (or closing the dispatcher) can still drop them.
//
// Why: such a handler may be queued on an executor that is slow, stopped or never
// run again. Its event would escape retire()'s sweep, and a destroy call that
// waits for every ack (rdma_destroy_id; ibv_destroy_cq and ibv_destroy_qp for
// their async events) would wait for ever. A Source whose events carry such acks
// declares `static constexpr bool hold_taken_events = true`: each taken event is
// then kept here until its handler runs; retire(object) and close() drop the
// object's (or every) held event, and that handler gets operation_aborted and an
// empty value.
//
// For every other Source, `enabled` is false and a waiter's handle is an empty
// struct: the CQ's hot path pays neither a pointer in each wait nor a check in
// each completion.
//
// Every member except take() runs under the dispatcher's lock.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

template <class Source>
class held_events {
public:
    using value_type = typename Source::value_type;

    static constexpr bool enabled = [] {
        if constexpr (requires { Source::hold_taken_events; })
            return static_cast<bool>(Source::hold_taken_events);
        else
            return false;
    }();

    struct entry {
        value_type value;
        bool dropped = false;
    };
    struct no_entry {};
    /// What a waiter keeps: where its result went.
    using handle = std::conditional_t<enabled, std::shared_ptr<entry>, no_entry>;

    /// The waiter takes `result`: it moves here, and `held` points to it.
    void hold(value_type& result, handle& held) {
        if constexpr (enabled) {
            held = std::make_shared<entry>(entry{std::move(result)});
            result = value_type{};
            entries_.push_back(held);
        }
    }

    /// Moves the held events of `object` (every held event for nullptr) into
    /// `dropped`; their handlers will see operation_aborted.
    void drop(const void* object, std::deque<value_type>& dropped) {
        if constexpr (enabled) {
            std::erase_if(entries_, [&](const std::shared_ptr<entry>& h) {
                if (object != nullptr && !Source::concerns(h->value, object))
                    return false;
                h->dropped = true;
                dropped.push_back(std::move(h->value));
                h->value = value_type{};
                return true;
            });
        }
    }

    /// The handler runs: its event leaves the keeping into `out`. False when
    /// drop() took it.
    bool release(const handle& held, value_type& out) {
        std::erase(entries_, held);
        return take(held, out);
    }

    /// As release(), once the dispatcher is gone (it dropped every held event as
    /// it closed); needs no lock.
    static bool take(const handle& held, value_type& out) {
        if (held->dropped)
            return false;
        out = std::move(held->value);
        return true;
    }

private:
    std::vector<std::shared_ptr<entry>> entries_;
};

} // namespace rdma_asio::detail
