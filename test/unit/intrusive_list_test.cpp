// The list every holder of operations links them in (detail/core/intrusive_list.hpp).
#include "rdma_asio/detail/core/intrusive_list.hpp"

#include <catch2/catch.hpp>

#include <vector>

namespace intrusive_list_test {

namespace {

// Two pairs of links, as a dispatcher's waiter has: in two lists at once.
struct item {
    int value = 0;
    item* prev = nullptr;
    item* next = nullptr;
    item* other_prev = nullptr;
    item* other_next = nullptr;
};

using list = rdma_asio::detail::intrusive_list<item, &item::prev, &item::next>;
using other_list = rdma_asio::detail::intrusive_list<item, &item::other_prev, &item::other_next>;

template <class List>
std::vector<int> values(const List& l) {
    std::vector<int> out;
    for (item* x = l.front(); x != nullptr; x = List::next(*x))
        out.push_back(x->value);
    return out;
}

} // namespace

TEST_CASE("an intrusive list keeps its order and unlinks from anywhere", "[intrusive_list]") {
    std::vector<item> items(4);
    for (int i = 0; i < 4; ++i)
        items[i].value = i;
    list l;
    CHECK(l.empty());
    CHECK_FALSE(l.single());
    l.push_back(items[0]);
    CHECK(l.single());
    for (int i = 1; i < 4; ++i)
        l.push_back(items[i]);
    CHECK(l.size() == 4);
    l.erase(items[2]); // the middle
    CHECK(values(l) == std::vector<int>{0, 1, 3});
    l.erase(items[3]); // the tail: the next push_back links after the new tail
    l.push_back(items[2]);
    CHECK(values(l) == std::vector<int>{0, 1, 2});
    l.erase(items[0]); // the head
    CHECK(values(l) == std::vector<int>{1, 2});
    CHECK(items[0].prev == nullptr);
    CHECK(items[0].next == nullptr);
    CHECK(l.pop_front() == &items[1]);
    CHECK(l.pop_front() == &items[2]);
    CHECK(l.pop_front() == nullptr);
    CHECK(l.empty());
}

TEST_CASE("an object with two pairs of links is in two lists at once", "[intrusive_list]") {
    std::vector<item> items(3);
    for (int i = 0; i < 3; ++i)
        items[i].value = i;
    list all;
    other_list some;
    for (auto& x : items)
        all.push_back(x);
    some.push_back(items[2]);
    some.push_back(items[0]);
    all.erase(items[0]);
    CHECK(values(all) == std::vector<int>{1, 2});
    CHECK(values(some) == std::vector<int>{2, 0});
    some.erase(items[2]);
    CHECK(values(some) == std::vector<int>{0});
    CHECK(values(all) == std::vector<int>{1, 2});
}

TEST_CASE("splice_back links a list's head after the other's tail, both ways", "[intrusive_list]") {
    std::vector<item> items(4);
    for (int i = 0; i < 4; ++i)
        items[i].value = i;
    list first, second;
    first.push_back(items[0]);
    second.push_back(items[1]);
    second.push_back(items[2]);
    first.splice_back(second);
    CHECK(second.empty());
    // The spliced head's back link is right: erasing it from the middle works.
    first.erase(items[1]);
    CHECK(values(first) == std::vector<int>{0, 2});
    first.erase(items[2]);
    first.push_back(items[3]);
    CHECK(values(first) == std::vector<int>{0, 3});
}

} // namespace intrusive_list_test
