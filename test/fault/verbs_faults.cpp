#include "verbs_faults.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <utility>

namespace rdma_asio::test::faults {
namespace {

// libibverbs' own function `name`: the next definition after this program's in the
// loader's order, at the version a program built against rdma-core binds
// (IBVERBS_1.1; 1.0 is the compatibility ABI).
template <class Function>
Function* real(const char* name) {
    void* f = dlvsym(RTLD_NEXT, name, "IBVERBS_1.1");
    if (f == nullptr) {
        std::fprintf(stderr, "verbs_faults: no %s@IBVERBS_1.1 after this program: %s\n", name,
                     dlerror());
        std::abort();
    }
    return reinterpret_cast<Function*>(f);
}

int real_get_async_event(ibv_context* context, ibv_async_event* event) {
    static auto* const f = real<int(ibv_context*, ibv_async_event*)>("ibv_get_async_event");
    return f(context, event);
}
void real_ack_async_event(ibv_async_event* event) {
    static auto* const f = real<void(ibv_async_event*)>("ibv_ack_async_event");
    f(event);
}
int real_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    static auto* const f = real<int(ibv_comp_channel*, ibv_cq**, void**)>("ibv_get_cq_event");
    return f(channel, cq, cq_context);
}
void real_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    static auto* const f = real<void(ibv_cq*, unsigned int)>("ibv_ack_cq_events");
    f(cq, nevents);
}

// An async event's identity for the books: its type and its element (object
// address or port number).
using event_key = std::pair<int, std::uintptr_t>;

event_key key_of(const ibv_async_event& ev) {
    std::uintptr_t element = 0;
    switch (ev.event_type) {
    case IBV_EVENT_CQ_ERR:
        element = reinterpret_cast<std::uintptr_t>(ev.element.cq);
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        element = reinterpret_cast<std::uintptr_t>(ev.element.srq);
        break;
    case IBV_EVENT_WQ_FATAL:
        element = reinterpret_cast<std::uintptr_t>(ev.element.wq);
        break;
    case IBV_EVENT_DEVICE_FATAL:
        break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
        element = static_cast<std::uintptr_t>(ev.element.port_num);
        break;
    default: // the QP events
        element = reinterpret_cast<std::uintptr_t>(ev.element.qp);
    }
    return {ev.event_type, element};
}

struct cq_state {
    cq_books books;
    std::uint64_t injected_unacked = 0;
    std::uint64_t real_unacked = 0;
};

struct state {
    std::mutex mutex;
    std::map<ibv_context*, std::deque<ibv_async_event>> async_pending;
    std::map<ibv_context*, int> async_error;
    std::map<ibv_comp_channel*, std::deque<ibv_cq*>> cq_pending;
    std::map<ibv_comp_channel*, int> channel_error;
    async_books async;
    std::map<event_key, std::uint64_t> injected_unacked;
    std::map<event_key, std::uint64_t> real_unacked;
    std::map<const ibv_cq*, cq_state> cqs;
};

state& global() {
    static state s;
    return s;
}

} // namespace

ibv_async_event qp_event(ibv_event_type type, ibv_qp* qp) {
    ibv_async_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.event_type = type;
    ev.element.qp = qp;
    return ev;
}

ibv_async_event cq_event(ibv_cq* cq) {
    ibv_async_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.event_type = IBV_EVENT_CQ_ERR;
    ev.element.cq = cq;
    return ev;
}

ibv_async_event device_fatal() {
    ibv_async_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.event_type = IBV_EVENT_DEVICE_FATAL;
    return ev;
}

void inject_async(ibv_context* ctx, const std::vector<ibv_async_event>& burst) {
    std::lock_guard lock(global().mutex);
    auto& q = global().async_pending[ctx];
    q.insert(q.end(), burst.begin(), burst.end());
}

void fail_async(ibv_context* ctx, int err) {
    std::lock_guard lock(global().mutex);
    global().async_error[ctx] = err;
}

std::size_t pending_async(ibv_context* ctx) {
    std::lock_guard lock(global().mutex);
    auto it = global().async_pending.find(ctx);
    return it == global().async_pending.end() ? 0 : it->second.size();
}

void inject_cq_events(ibv_comp_channel* channel, const std::vector<ibv_cq*>& cqs) {
    std::lock_guard lock(global().mutex);
    auto& q = global().cq_pending[channel];
    q.insert(q.end(), cqs.begin(), cqs.end());
}

void fail_channel(ibv_comp_channel* channel, int err) {
    std::lock_guard lock(global().mutex);
    global().channel_error[channel] = err;
}

async_books async_counts() {
    std::lock_guard lock(global().mutex);
    return global().async;
}

cq_books cq_counts(const ibv_cq* cq) {
    std::lock_guard lock(global().mutex);
    auto it = global().cqs.find(cq);
    return it == global().cqs.end() ? cq_books{} : it->second.books;
}

void reset() {
    state& s = global();
    std::lock_guard lock(s.mutex);
    s.async_pending.clear();
    s.async_error.clear();
    s.cq_pending.clear();
    s.channel_error.clear();
    s.async = {};
    s.injected_unacked.clear();
    s.real_unacked.clear();
    s.cqs.clear();
}

void raise_sq_drained(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, std::vector<qp_ptr>& keep) {
    qp_ptr a = make_rc_qp(pd, cq, cq);
    qp_ptr b = make_rc_qp(pd, cq, cq);
    connect_rc(ctx, a.get(), b->qp_num);
    connect_rc(ctx, b.get(), a->qp_num);
    ibv_qp_attr sqd{};
    sqd.qp_state = IBV_QPS_SQD;
    sqd.en_sqd_async_notify = 1;
    if (int rc = ibv_modify_qp(a.get(), &sqd, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY); rc != 0)
        throw std::system_error(rc, std::generic_category(), "ibv_modify_qp to SQD");
    keep.push_back(std::move(a));
    keep.push_back(std::move(b));
}

} // namespace rdma_asio::test::faults

using namespace rdma_asio::test::faults;

extern "C" int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    state& s = global();
    {
        std::lock_guard lock(s.mutex);
        auto pending = s.async_pending.find(context);
        if (pending != s.async_pending.end() && !pending->second.empty()) {
            *event = pending->second.front();
            pending->second.pop_front();
            ++s.injected_unacked[key_of(*event)];
            ++s.async.injected_read;
            return 0;
        }
        auto error = s.async_error.find(context);
        if (error != s.async_error.end() && error->second != 0) {
            errno = error->second;
            return -1;
        }
    }
    const int r = real_get_async_event(context, event);
    if (r == 0) {
        const int saved = errno;
        std::lock_guard lock(s.mutex);
        ++s.real_unacked[key_of(*event)];
        ++s.async.real_read;
        errno = saved;
    }
    return r;
}

extern "C" void ibv_ack_async_event(ibv_async_event* event) {
    state& s = global();
    const event_key key = key_of(*event);
    {
        std::lock_guard lock(s.mutex);
        if (auto it = s.injected_unacked.find(key); it != s.injected_unacked.end() && it->second) {
            --it->second;
            ++s.async.injected_acked;
            return;
        }
        auto it = s.real_unacked.find(key);
        if (it == s.real_unacked.end() || it->second == 0) {
            ++s.async.excess_acks;
            return;
        }
        --it->second;
        ++s.async.real_acked;
    }
    real_ack_async_event(event);
}

extern "C" int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    state& s = global();
    {
        std::lock_guard lock(s.mutex);
        auto pending = s.cq_pending.find(channel);
        if (pending != s.cq_pending.end() && !pending->second.empty()) {
            *cq = pending->second.front();
            *cq_context = (*cq)->cq_context;
            pending->second.pop_front();
            cq_state& c = s.cqs[*cq];
            ++c.books.injected_read;
            ++c.injected_unacked;
            return 0;
        }
        auto error = s.channel_error.find(channel);
        if (error != s.channel_error.end() && error->second != 0) {
            errno = error->second;
            return -1;
        }
    }
    const int r = real_get_cq_event(channel, cq, cq_context);
    if (r == 0) {
        const int saved = errno;
        std::lock_guard lock(s.mutex);
        cq_state& c = s.cqs[*cq];
        ++c.books.real_read;
        ++c.real_unacked;
        errno = saved;
    }
    return r;
}

extern "C" void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    state& s = global();
    unsigned real = 0;
    {
        std::lock_guard lock(s.mutex);
        cq_state& c = s.cqs[cq];
        c.books.acked += nevents;
        std::uint64_t n = nevents;
        const std::uint64_t injected = std::min(n, c.injected_unacked);
        c.injected_unacked -= injected;
        n -= injected;
        const std::uint64_t owed = std::min(n, c.real_unacked);
        c.real_unacked -= owed;
        c.books.excess_acks += n - owed;
        real = static_cast<unsigned>(owed);
    }
    if (real > 0)
        real_ack_cq_events(cq, real);
}
