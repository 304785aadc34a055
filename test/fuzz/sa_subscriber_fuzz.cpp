// The SA subscription state machine driven by a fuzzer-chosen script of
// registrations, unregistrations, Reports, answers of the SA, garbage MADs, time
// and resubscriptions, with its invariants checked after every step against a model
// kept here:
// - every operation completes exactly once, queued ones in the order they started
//   (rejected ones at once), with EINVAL exactly when the arguments are invalid, and
//   every one ends when the SA falls silent;
// - one ReportResp, echoing it, for every Report (duplicates too), none otherwise;
// - events only from a Report that a registration matches, never from a duplicate,
//   and, with no operation under way, from every such Report;
// - one request to the SA at a time per operation, new TIDs, retries as configured,
//   next_deadline() the earliest of them;
// - no trap claimed subscribed unless the SA confirmed it and nothing about it timed
//   out since; a registration reports success only once the SA confirmed every
//   trap it needs; abandon() unsubscribes every trap that may be subscribed.
#include "fuzz_check.hpp"
#include "sa_subscriber_script.hpp"

#include "rdma_asio/detail/subnet/sa_subscriber.hpp"
#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <optional>
#include <set>

namespace sa = rdma_asio::detail::sa;
namespace script = rdma_asio::fuzz::subscriber_script;
using rdma_asio::event_type;
using rdma_asio::sm_event_mask;
using rdma_asio::detail::sa_subscriber;
using rdma_asio::detail::sm_registrations;
using rdma_asio::fuzz::script_reader;
using namespace std::chrono_literals;

namespace {

using clock = sa_subscriber::clock;
constexpr auto timeout = 100ms;
constexpr std::uint8_t resp_time_value = 18;

bool same_gid(const ibv_gid& a, const ibv_gid& b) {
    return std::memcmp(a.raw, b.raw, sizeof a.raw) == 0;
}
bool is_multicast(const ibv_gid& gid) {
    return gid.raw[0] == 0xff;
}

ibv_gid pool_gid(std::uint8_t i) {
    ibv_gid g{};
    g.raw[0] = i < 2 ? 0xfe : 0xff;
    g.raw[15] = static_cast<std::uint8_t>(i + 1);
    return g;
}

std::optional<event_type> event_of_trap(std::uint16_t trap) {
    switch (trap) {
    case 64:
        return event_type::gid_avail;
    case 65:
        return event_type::gid_unavail;
    case 66:
        return event_type::mcg_created;
    case 67:
        return event_type::mcg_deleted;
    }
    return std::nullopt;
}

// The registrations as the documentation of sm_event_mask describes them.
struct registrations {
    bool ugid_all = false;
    bool mgid_all = false;
    std::vector<ibv_gid> ugids, mgids;

    static bool has(unsigned mask, sm_event_mask f) {
        return (mask & static_cast<unsigned>(f)) != 0;
    }
    static bool contains(const std::vector<ibv_gid>& v, const ibv_gid& g) {
        return std::any_of(v.begin(), v.end(), [&](const ibv_gid& x) { return same_gid(x, g); });
    }
    void add(unsigned mask, const std::vector<ibv_gid>& gids) {
        ugid_all |= has(mask, sm_event_mask::ugid_all) || has(mask, sm_event_mask::all);
        mgid_all |= has(mask, sm_event_mask::mgid_all) || has(mask, sm_event_mask::all);
        for (const auto& g : gids) {
            auto& v = is_multicast(g) ? mgids : ugids;
            if (!contains(v, g))
                v.push_back(g);
        }
    }
    void remove(unsigned mask, const std::vector<ibv_gid>& gids) {
        if (has(mask, sm_event_mask::ugid_all) || has(mask, sm_event_mask::all))
            ugid_all = false;
        if (has(mask, sm_event_mask::mgid_all) || has(mask, sm_event_mask::all))
            mgid_all = false;
        if (has(mask, sm_event_mask::all))
            ugids.clear(), mgids.clear();
        for (const auto& g : gids)
            std::erase_if(is_multicast(g) ? mgids : ugids,
                          [&](const ibv_gid& x) { return same_gid(x, g); });
    }
    bool wants(event_type t, const ibv_gid& g) const {
        if (t == event_type::gid_avail || t == event_type::gid_unavail)
            return ugid_all || contains(ugids, g);
        return mgid_all || contains(mgids, g);
    }
    bool wants_trap(std::uint16_t trap) const {
        return trap < 66 ? ugid_all || !ugids.empty() : mgid_all || !mgids.empty();
    }
};

// What the SA may hold for a trap, as far as the client can know.
enum class held { no, yes, unknown, either };

struct request {
    std::uint16_t trap;
    bool subscribe;
    int retries_left;
    clock::time_point deadline;
    sa::mad_buffer mad;
    sa::inform_info info;
};

enum class kind { add, remove, remove_all };
struct queued_op {
    std::uint64_t id;
    kind k;
    unsigned mask;
    std::vector<ibv_gid> gids;
    bool valid;
};

class harness {
public:
    harness(int retries, std::uint32_t first_tid)
        : retries_(retries), fsm_(make_config(retries), first_tid) {}

    void step(script_reader& in) {
        const auto op = static_cast<script::op>(in.u8() % script::count);
        sa_subscriber::actions out;
        before_call();
        switch (op) {
        case script::start_register:
        case script::start_unregister:
            start(op == script::start_register ? kind::add : kind::remove, in, out);
            break;
        case script::start_unregister_all: {
            const auto id = fsm_.start_unregister_all(now_, out);
            queued_.push_back(
                {id, kind::remove_all, static_cast<unsigned>(sm_event_mask::all), {}, true});
            break;
        }
        case script::reject: {
            const auto ec = rdma_asio::make_error_code(rdma_asio::errc::no_subnet_manager);
            const auto id = fsm_.reject(ec, out);
            FUZZ_CHECK(id != 0);
            expect_rejected_ = id;
            break;
        }
        case script::resubscribe:
            fsm_.resubscribe(now_, out);
            break;
        case script::report: {
            sa::notice n;
            const std::uint8_t trap = in.u8();
            n.trap_number = static_cast<std::uint16_t>(trap < 8 ? 64 + (trap & 3) : trap);
            n.is_generic = (in.u8() & 1) == 0;
            n.type = 4;
            n.producer_type = 4;
            n.set_subject_gid(read_gid(in.u8(), in));
            mad(sa::encode_report(in.u16(), n), out);
            return; // mad() checked the call
        }
        case script::answer: {
            const std::uint8_t index = in.u8();
            const std::uint16_t status = in.u16();
            const std::uint64_t high = std::uint64_t{in.u32()} << 32;
            if (live_.empty()) {
                sa::inform_info info = sa::wildcard_subscription(64, true, resp_time_value);
                mad(sa::encode_inform_info_response(high | (sent_max_ + 1), info, status), out);
            } else {
                auto it = std::next(live_.begin(), index % live_.size());
                mad(sa::encode_inform_info_response(high | it->first, it->second.info, status),
                    out);
            }
            return;
        }
        case script::raw_mad: {
            const auto bytes = in.bytes(in.u16() % 300);
            mad(bytes, out);
            return;
        }
        case script::advance_time:
            now_ += std::chrono::milliseconds(in.u16() % 1000);
            timer(out);
            break;
        case script::abandon:
            abandon();
            return;
        case script::count:
            break;
        }
        after_call(out, nullptr);
    }

    // The SA falls silent: every operation still queued must end (timed out at worst)
    // within its retries, each once.
    void run_out() {
        std::size_t rounds = 0;
        while (!queued_.empty() || !live_.empty()) {
            FUZZ_CHECK(++rounds <= 100000);
            sa_subscriber::actions out;
            before_call();
            now_ += timeout;
            timer(out);
            after_call(out, nullptr);
        }
        FUZZ_CHECK(!fsm_.next_deadline());
    }

private:
    static sa_subscriber::config make_config(int retries) {
        sa_subscriber::config cfg;
        cfg.timeout = timeout;
        cfg.retries = retries;
        cfg.resp_time_value = resp_time_value;
        return cfg;
    }

    ibv_gid read_gid(std::uint8_t index, script_reader& in) {
        if (index < script::gid_pool_size)
            return pool_gid(index);
        ibv_gid g;
        for (auto& b : g.raw)
            b = in.u8();
        return g;
    }

    void start(kind k, script_reader& in, sa_subscriber::actions& out) {
        const std::uint8_t selector = in.u8();
        const unsigned mask =
            selector < script::mask_count ? script::masks[selector] : selector - script::mask_count;
        std::vector<ibv_gid> gids;
        for (int n = in.u8() % 4; n > 0; --n)
            gids.push_back(read_gid(in.u8(), in));
        const bool valid = !sm_registrations::validate(static_cast<sm_event_mask>(mask), gids);
        const auto id =
            k == kind::add
                ? fsm_.start_register(static_cast<sm_event_mask>(mask), gids, now_, out)
                : fsm_.start_unregister(static_cast<sm_event_mask>(mask), gids, now_, out);
        FUZZ_CHECK(id != 0);
        FUZZ_CHECK(ids_.insert(id).second);
        queued_.push_back({id, k, mask, std::move(gids), valid});
    }

    std::size_t slot(std::uint16_t trap) const { return trap - 64u; }

    void before_call() {
        live_at_start_ = live_;
        expect_rejected_.reset();
        expected_retries_.clear();
    }

    // A MAD to the state machine: what it must answer follows from the MAD alone.
    void mad(std::span<const std::uint8_t> bytes, sa_subscriber::actions& out) {
        before_call();
        sa::notice n;
        sa::mad_header h;
        const bool is_report = !sa::decode_report(bytes, n);
        if (!is_report && !sa::decode_header(bytes, h) && h.method == sa::method::get_resp &&
            h.attr_id == sa::attr::inform_info) {
            sa::inform_info info;
            auto it = live_.find(static_cast<std::uint32_t>(h.tid));
            if (!sa::decode_inform_info(bytes, info) && it != live_.end())
                conclude(it, h.status);
        }
        fsm_.on_mad(bytes, now_, out);
        after_call(out, is_report ? &bytes : nullptr);
    }

    void conclude(std::map<std::uint32_t, request>::iterator it, std::uint16_t status) {
        held& h = traps_[slot(it->second.trap)];
        if (status == 0)
            h = it->second.subscribe ? held::yes : held::no;
        else if (!it->second.subscribe)
            h = held::either; // refused unsubscribe: perhaps it had none
        // A refused subscribe changes nothing.
        live_.erase(it);
    }

    void timer(sa_subscriber::actions& out) {
        for (auto it = live_.begin(); it != live_.end();) {
            request& r = it->second;
            if (r.deadline > now_) {
                ++it;
            } else if (r.retries_left > 0) {
                --r.retries_left;
                r.deadline = now_ + timeout;
                expected_retries_.insert(it->first);
                ++it;
            } else {
                traps_[slot(r.trap)] = held::unknown;
                it = live_.erase(it);
            }
        }
        fsm_.on_timer(now_, out);
    }

    void after_call(const sa_subscriber::actions& out,
                    const std::span<const std::uint8_t>* report) {
        check_sends(out, report);
        check_completions(out);
        check_events(out, report);
        check_state();
    }

    void check_sends(const sa_subscriber::actions& out,
                     const std::span<const std::uint8_t>* report) {
        std::size_t report_resps = 0;
        std::set<std::uint32_t> retried;
        bool new_requests = false;
        for (const auto& m : out.sends) {
            sa::mad_header h;
            FUZZ_CHECK(!sa::decode_header(m, h));
            if (h.method == sa::method::report_resp) {
                FUZZ_CHECK(report != nullptr);
                FUZZ_CHECK(m == sa::encode_report_response(*report));
                ++report_resps;
                continue;
            }
            FUZZ_CHECK(h.method == sa::method::set && h.attr_id == sa::attr::inform_info);
            sa::inform_info info;
            FUZZ_CHECK(!sa::decode_inform_info(m, info));
            FUZZ_CHECK(info.trap_number >= 64 && info.trap_number <= 67);
            FUZZ_CHECK(info.qpn == 1 && info.resp_time_value == resp_time_value);
            FUZZ_CHECK(info.lid_range_begin == 0xffff && info.is_generic);
            const auto tid = static_cast<std::uint32_t>(h.tid);
            FUZZ_CHECK(h.tid == tid); // the kernel owns the high bits
            if (sent_.contains(tid)) {
                // Only a retry reuses a TID: the same request again, when due.
                FUZZ_CHECK(expected_retries_.contains(tid) && live_.contains(tid));
                FUZZ_CHECK(m == live_.at(tid).mad);
                FUZZ_CHECK(retried.insert(tid).second);
                continue;
            }
            sent_.insert(tid);
            sent_max_ = std::max(sent_max_, tid);
            new_requests = true;
            live_.emplace(
                tid, request{info.trap_number, info.subscribe, retries_, now_ + timeout, m, info});
        }
        FUZZ_CHECK(retried.size() == expected_retries_.size());
        FUZZ_CHECK(report_resps == (report != nullptr ? 1u : 0u));
        if (report != nullptr)
            FUZZ_CHECK(out.sends.size() == 1 && out.completions.empty());
        if (new_requests) {
            // One operation asks at a time: whatever was awaited at the start of the
            // call has been answered or given up.
            for (const auto& [tid, r] : live_at_start_)
                FUZZ_CHECK(!live_.contains(tid));
        }
    }

    void check_completions(const sa_subscriber::actions& out) {
        bool rejected_seen = false;
        for (const auto& c : out.completions) {
            if (expect_rejected_ && c.op == *expect_rejected_) {
                FUZZ_CHECK(!rejected_seen);
                FUZZ_CHECK(c.ec == rdma_asio::errc::no_subnet_manager);
                rejected_seen = true;
                continue;
            }
            // First in, first out, each once.
            FUZZ_CHECK(!queued_.empty());
            const queued_op op = queued_.front();
            FUZZ_CHECK(c.op == op.id);
            queued_.pop_front();
            FUZZ_CHECK(done_.insert(c.op).second);
            if (!op.valid) {
                FUZZ_CHECK(c.ec == asio::error::invalid_argument);
                continue;
            }
            FUZZ_CHECK(!c.ec || c.ec == asio::error::timed_out ||
                       c.ec == rdma_asio::errc::sa_request_refused);
            switch (op.k) {
            case kind::add:
                if (!c.ec) {
                    confirmed_.add(op.mask, op.gids);
                    // Success only once the SA confirmed every trap now needed.
                    for (std::uint16_t trap = 64; trap <= 67; ++trap)
                        if (confirmed_.wants_trap(trap)) {
                            const held h = traps_[slot(trap)];
                            FUZZ_CHECK(h == held::yes || h == held::either);
                        }
                }
                break;
            case kind::remove:
            case kind::remove_all:
                confirmed_.remove(op.mask, op.gids); // locally, whatever the SA said
                break;
            }
        }
        FUZZ_CHECK(rejected_seen == expect_rejected_.has_value());
    }

    void check_events(const sa_subscriber::actions& out,
                      const std::span<const std::uint8_t>* report) {
        if (report == nullptr) {
            FUZZ_CHECK(out.events.empty());
            return;
        }
        sa::notice n;
        sa::mad_header h;
        FUZZ_CHECK(!sa::decode_report(*report, n) && !sa::decode_header(*report, h));
        const bool duplicate = std::find(recent_.begin(), recent_.end(), h.tid) != recent_.end();
        if (!duplicate) {
            recent_.push_back(h.tid);
            if (recent_.size() > 256)
                recent_.pop_front();
        }
        const auto type = n.is_generic ? event_of_trap(n.trap_number) : std::nullopt;
        const ibv_gid gid = n.subject_gid();
        FUZZ_CHECK(out.events.size() <= 1);
        if (!out.events.empty()) {
            FUZZ_CHECK(!duplicate && type);
            FUZZ_CHECK(out.events[0].type == *type && same_gid(out.events[0].gid, gid));
            // Some registration made or under way matches it.
            bool matched = confirmed_.wants(*type, gid);
            for (const auto& op : queued_)
                if (op.k == kind::add && op.valid) {
                    registrations r;
                    r.add(op.mask, op.gids);
                    matched = matched || r.wants(*type, gid);
                }
            FUZZ_CHECK(matched);
        } else if (queued_.empty() && !duplicate && type) {
            FUZZ_CHECK(!confirmed_.wants(*type, gid)); // no Report lost
        }
    }

    void check_state() {
        for (std::uint16_t trap = 64; trap <= 67; ++trap) {
            const held h = traps_[slot(trap)];
            if (fsm_.subscribed(trap))
                FUZZ_CHECK(h == held::yes || h == held::either);
            if (h == held::yes || h == held::unknown)
                FUZZ_CHECK(fsm_.active()); // Reports may come: they must be read
        }
        if (!queued_.empty())
            FUZZ_CHECK(fsm_.active());
        const auto deadline = fsm_.next_deadline();
        FUZZ_CHECK(deadline.has_value() == !live_.empty());
        if (deadline) {
            auto earliest = live_.begin()->second.deadline;
            for (const auto& [tid, r] : live_)
                earliest = std::min(earliest, r.deadline);
            FUZZ_CHECK(*deadline == earliest);
            FUZZ_CHECK(*deadline > now_);
        }
    }

    void abandon() {
        for (const auto& [tid, r] : live_)
            if (r.subscribe)
                traps_[slot(r.trap)] = held::unknown;
        const auto goodbyes = fsm_.abandon();
        std::set<std::uint16_t> unsubscribed;
        for (const auto& m : goodbyes) {
            sa::mad_header h;
            sa::inform_info info;
            FUZZ_CHECK(!sa::decode_header(m, h) && h.method == sa::method::set);
            FUZZ_CHECK(!sa::decode_inform_info(m, info) && !info.subscribe);
            FUZZ_CHECK(info.qpn == 1 && info.resp_time_value == resp_time_value);
            FUZZ_CHECK(sent_.insert(static_cast<std::uint32_t>(h.tid)).second);
            sent_max_ = std::max(sent_max_, static_cast<std::uint32_t>(h.tid));
            FUZZ_CHECK(unsubscribed.insert(info.trap_number).second);
        }
        for (std::uint16_t trap = 64; trap <= 67; ++trap) {
            const held h = traps_[slot(trap)];
            if (h == held::yes || h == held::unknown)
                FUZZ_CHECK(unsubscribed.contains(trap));
            traps_[slot(trap)] = held::no;
        }
        FUZZ_CHECK(!fsm_.active());
        FUZZ_CHECK(!fsm_.next_deadline());
        // Dropped: they never complete (their waiters are the caller's to abort).
        for (const auto& op : queued_)
            done_.insert(op.id);
        queued_.clear();
        live_.clear();
        confirmed_ = {};
    }

    int retries_;
    sa_subscriber fsm_;
    clock::time_point now_{};
    std::map<std::uint32_t, request> live_; // sent, neither answered nor given up
    std::map<std::uint32_t, request> live_at_start_;
    std::set<std::uint32_t> expected_retries_;
    std::set<std::uint32_t> sent_;
    std::uint32_t sent_max_ = 0;
    std::array<held, 4> traps_{held::no, held::no, held::no, held::no};
    std::deque<queued_op> queued_;
    std::set<std::uint64_t> ids_, done_;
    std::optional<std::uint64_t> expect_rejected_;
    registrations confirmed_;
    std::deque<std::uint64_t> recent_;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    script_reader in({data, size});
    const int retries = in.u8() % 4;
    harness h(retries, in.u32());
    for (int steps = 0; steps < 400 && !in.empty(); ++steps)
        h.step(in);
    h.run_out();
    return 0;
}
