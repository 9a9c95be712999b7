// SPDX-License-Identifier: BSD-3-Clause
// verbs::owned: each object destroyed once, by whoever holds it last.
#include "verbs/owned.h"

#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

namespace zv::test {
namespace {

struct thing {
    int id;
};

std::vector<int> destroyed; // ids, in order

void destroy_thing(thing *t) { destroyed.push_back(t->id); }

using handle = verbs::owned<thing, destroy_thing>;

static_assert(sizeof(handle) == sizeof(void *), "a handle is a pointer wide");
static_assert(sizeof(verbs::qp) == sizeof(ibv_qp *), "a QP handle is a pointer wide");
static_assert(!std::is_copy_constructible_v<handle> && !std::is_copy_assignable_v<handle>,
              "one owner");
static_assert(std::is_nothrow_move_constructible_v<handle> &&
                      std::is_nothrow_move_assignable_v<handle>,
              "moves in containers (a map of AHs) never throw");
static_assert(!std::is_convertible_v<handle, bool>, "operator bool is explicit");

class owned : public ::testing::Test {
protected:
    void SetUp() override { destroyed.clear(); }
};

TEST_F(owned, destroys_its_object_once_when_it_goes)
{
    thing a{1};
    {
        handle h(&a);
        EXPECT_TRUE(h);
        EXPECT_EQ(&a, h.get());
        EXPECT_EQ(1, h->id);
    }
    EXPECT_EQ(std::vector<int>{1}, destroyed);
    {
        handle empty;
        EXPECT_FALSE(empty);
        handle failed(nullptr); // an ibv_create_*() that returned NULL
        EXPECT_FALSE(failed);
    }
    EXPECT_EQ(std::vector<int>{1}, destroyed) << "nothing held, nothing destroyed";
}

TEST_F(owned, a_move_hands_the_object_over)
{
    thing a{1}, b{2};
    handle h(&a);
    handle moved(std::move(h));
    EXPECT_FALSE(h);
    EXPECT_EQ(&a, moved.get());
    handle other(&b);
    other = std::move(moved); // b goes, a stays
    EXPECT_EQ(std::vector<int>{2}, destroyed);
    EXPECT_EQ(&a, other.get());
    handle &same = other;
    other        = std::move(same);
    EXPECT_EQ(&a, other.get()) << "moved onto itself, it keeps its object";
    other.reset();
    EXPECT_FALSE(other);
    EXPECT_EQ((std::vector<int>{2, 1}), destroyed);
}

TEST_F(owned, reset_destroys_the_old_before_taking_the_new_and_release_destroys_nothing)
{
    thing a{1}, b{2};
    handle h(&a);
    h.reset(&b);
    EXPECT_EQ(std::vector<int>{1}, destroyed);
    EXPECT_EQ(&b, h.get());
    thing *raw = h.release();
    EXPECT_EQ(&b, raw);
    EXPECT_FALSE(h);
    h.reset();
    EXPECT_EQ(std::vector<int>{1}, destroyed) << "released: the caller's";
}

} // namespace
} // namespace zv::test
