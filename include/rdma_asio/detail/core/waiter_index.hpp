// The pending waits of an event_dispatcher: every one in arrival order (first come,
// first served), and, for waits of many objects on one source, each object's own.
//
// Why an index: CQs that share a completion channel each wait for the events of
// their own CQ. Offering each event to every pending wait in turn would cost as
// many matcher calls as there are CQs; a Source that offers
// `static const void* object_of(const value_type&)`, with Matchers that declare
// only_own_events (wait_matcher.hpp), has those waits listed by object as well, so
// that handing out an event costs the same whether 1 or 256 objects wait. While any
// other wait is pending, events are offered in plain arrival order, because that
// wait may accept an event of any object.
//
// A Waiter carries its own links (prev/next for arrival order; object_prev,
// object_next and object_waits for its object's list) and says key() and
// only_own_events(). Every member runs under the dispatcher's lock.
#pragma once

#include "rdma_asio/detail/core/intrusive_list.hpp"

#include <concepts>
#include <cstddef>
#include <unordered_map>

namespace rdma_asio::detail {

template <class Waiter, class Source>
class waiter_index {
public:
    using value_type = typename Source::value_type;
    /// Waiters in arrival order; the same links then carry them, taken off the
    /// index, to completion after the lock is released.
    using list = intrusive_list<Waiter, &Waiter::prev, &Waiter::next>;

    /// Whether the Source names each event's object, so waits can be indexed.
    static constexpr bool indexes_waits = requires(const value_type& ev) {
        { Source::object_of(ev) } -> std::convertible_to<const void*>;
    };

    bool empty() const noexcept { return all_.empty(); }
    bool single() const noexcept { return all_.single(); }
    /// The earliest pending waiter, or null.
    Waiter* front() const noexcept { return all_.front(); }
    /// The waiter after `w` in arrival order, or null.
    static Waiter* next(const Waiter& w) noexcept { return list::next(w); }

    void add(Waiter& w) {
        all_.push_back(w);
        if constexpr (indexes_waits) {
            if (w.only_own_events()) {
                object_list& own = by_object_[w.key()];
                own.push_back(w);
                w.object_waits = &own;
                return;
            }
        }
        ++unindexed_;
    }

    void remove(Waiter& w) noexcept {
        all_.erase(w);
        if (w.object_waits != nullptr) {
            static_cast<object_list*>(w.object_waits)->erase(w);
            w.object_waits = nullptr;
        } else {
            --unindexed_;
        }
    }

    /// `object` retires: its (empty) list goes. Until then an entry stays, so
    /// that waiting again allocates nothing.
    void forget(const void* object) {
        if constexpr (indexes_waits)
            by_object_.erase(object);
    }

    /// Calls f(list) with the waiters that may accept `ev`, in arrival order:
    /// its object's own when every pending wait is indexed, else all of them.
    /// Returns what f returns, or false when no waiter may accept it.
    template <class F>
    bool for_candidates(const value_type& ev, F&& f) {
        if constexpr (indexes_waits) {
            if (unindexed_ == 0) {
                auto it = by_object_.find(Source::object_of(ev));
                return it != by_object_.end() && f(it->second);
            }
        }
        return f(all_);
    }

private:
    using object_list = intrusive_list<Waiter, &Waiter::object_prev, &Waiter::object_next>;

    list all_;
    std::unordered_map<const void*, object_list> by_object_;
    std::size_t unindexed_ = 0; // pending waiters not in by_object_
};

} // namespace rdma_asio::detail
