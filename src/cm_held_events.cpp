#include "rdma_asio/detail/cm_held_events.hpp"
#include "rdma_asio/detail/cm_event_source.hpp"

#include <asio/error.hpp>

#include <algorithm>
#include <utility>

namespace rdma_asio::detail {

void cm_held_events::put(const std::shared_ptr<cm_held>& slot, std::error_code ec, cm_event ev) {
    {
        std::lock_guard lock(mutex_);
        const bool id_closing = std::any_of(closing_.begin(), closing_.end(),
                                            [&](auto* id) { return cm_id_match{id}(ev); });
        if (!ev || !id_closing) {
            slot->ec = ec;
            if (ev) {
                slot->ev = std::move(ev);
                parked_.push_back(slot);
            }
            return;
        }
        slot->ec = asio::error::operation_aborted;
    }
    drop_connect_request(ev); // outside the lock; acks any other event
}

cm_held cm_held_events::take(const std::shared_ptr<cm_held>& slot) {
    std::lock_guard lock(mutex_);
    parked_.erase(std::remove(parked_.begin(), parked_.end(), slot), parked_.end());
    return std::move(*slot);
}

void cm_held_events::end_close(const rdma_cm_id* id) {
    std::lock_guard lock(mutex_);
    closing_.erase(std::remove(closing_.begin(), closing_.end(), id), closing_.end());
}

std::vector<cm_event> cm_held_events::begin_close(const rdma_cm_id* id) {
    std::vector<cm_event> taken;
    std::lock_guard lock(mutex_);
    closing_.push_back(id);
    for (auto it = parked_.begin(); it != parked_.end();) {
        cm_held& held = **it;
        if (cm_id_match{id}(held.ev)) {
            taken.push_back(std::move(held.ev));
            held.ec = asio::error::operation_aborted;
            it = parked_.erase(it);
        } else {
            ++it;
        }
    }
    return taken;
}

std::vector<cm_event> cm_held_events::take_all() {
    std::vector<cm_event> taken;
    std::lock_guard lock(mutex_);
    for (auto& slot : parked_) {
        taken.push_back(std::move(slot->ev));
        slot->ec = asio::error::operation_aborted;
    }
    parked_.clear();
    return taken;
}

} // namespace rdma_asio::detail
