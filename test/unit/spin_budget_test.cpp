#include "rdma_asio/spin_budget.hpp"

#include <catch2/catch.hpp>

namespace spin_budget_test {

using namespace std::chrono_literals;
using rdma_asio::spin_budget;
using rdma_asio::detail::spin_policy;

TEST_CASE("no spinning by default", "[spin_budget]") {
    spin_policy p;
    CHECK(p.budget() == 0ns);
    p.on_completion(spin_policy::clock::now());
    CHECK(p.budget() == 0ns);
}

TEST_CASE("a fixed budget is the limit", "[spin_budget]") {
    spin_policy p(spin_budget::fixed(50us));
    CHECK(p.budget() == 50us);
}

TEST_CASE("an adaptive budget follows the gaps between completions", "[spin_budget]") {
    spin_policy p(spin_budget::adaptive(100us));
    CHECK(p.budget() == 0ns); // nothing learnt yet
    spin_policy::clock::time_point t{};
    p.on_completion(t);
    CHECK(p.budget() == 0ns); // one completion: no gap yet
    p.on_completion(t += 10us);
    CHECK(p.average_gap() == 10us);
    CHECK(p.budget() == 20us); // twice the gap
    for (int i = 0; i < 20; ++i)
        p.on_completion(t += 40us);
    CHECK(p.average_gap() > 39us); // converges on the new gap
    CHECK(p.average_gap() <= 40us);
    CHECK(p.budget() > 78us);
    CHECK(p.budget() <= 80us);
    for (int i = 0; i < 20; ++i)
        p.on_completion(t += 70us);
    CHECK(p.budget() == 100us); // capped at the limit
    for (int i = 0; i < 20; ++i)
        p.on_completion(t += 1ms);
    CHECK(p.budget() == 0ns); // completions too far apart: sleep at once
}

TEST_CASE("a budget too long for nanoseconds counts as the longest, not as none", "[spin_budget]") {
    spin_policy forever(spin_budget::fixed(std::chrono::microseconds::max()));
    CHECK(forever.budget() == spin_budget::longest);
    spin_policy busy(spin_budget::busy());
    CHECK(busy.budget() == spin_budget::longest);
    spin_policy negative(spin_budget::fixed(-5us));
    CHECK(negative.budget() == 0ns);
    // The machine adds the budget to a steady_clock time: that must not overflow.
    const auto now = spin_policy::clock::now();
    CHECK(now + busy.budget() > now);
}

} // namespace spin_budget_test
