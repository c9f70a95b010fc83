// The in-process link (net/local_link.h): order per direction, one delivery
// at a time to an end, copies rather than shared buffers, handlers that send
// back, and closing from either end.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <thread>
#include <vector>

#include "net/local_link.h"

namespace bonfire::net {
namespace {

Message numbered(int i) {
  Message m(nlohmann::json{{"type", "n"}, {"i", i}});
  Tensor t = Tensor::empty({2});
  t.f32()[0] = static_cast<float>(i);
  t.f32()[1] = -1;
  m.tensors["x"] = t;
  return m;
}

TEST(LocalLink, DeliversInOrderAsCopiesOfWhatTheWireCarries) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  std::vector<int> got;
  std::vector<float> values;
  b->start([&](Message m) {
    got.push_back(m.header["i"].get<int>());
    values.push_back(m.tensors.at("x").f32()[0]);
  }, nullptr);
  a->start([](Message) {}, nullptr);
  Message m = numbered(0);
  a->send(m);
  m.tensors["x"].f32()[0] = 99;  // after sending: the receiver's copy is its own
  for (int i = 1; i < 5; ++i) a->send(numbered(i));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values[0], 0.f);
  a->close("done");
}

TEST(LocalLink, MessagesSentBeforeStartWaitForIt) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  a->send(numbered(7));
  a->send(numbered(8));
  std::vector<int> got;
  b->start([&](Message m) { got.push_back(m.header["i"].get<int>()); }, nullptr);
  EXPECT_EQ(got, (std::vector<int>{7, 8}));
  b->close("done");
}

// A handler that answers at once runs the other end's handler on its own
// thread; a reply to that reply waits for the delivery in progress instead
// of nesting deeper, so a long exchange does not grow the stack.
TEST(LocalLink, HandlersThatSendBackTakeTurnsWithoutNesting) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  std::atomic<int> depth{0}, deepest{0};
  std::vector<int> seen_by_a;
  auto enter = [&] {
    const int d = ++depth;
    if (d > deepest) deepest = d;
  };
  b->start([&, b = b](Message m) {
    enter();
    const int i = m.header["i"].get<int>();
    b->send(numbered(i + 1));
    --depth;
  }, nullptr);
  a->start([&, a = a](Message m) {
    enter();
    const int i = m.header["i"].get<int>();
    seen_by_a.push_back(i);
    if (i < 199) a->send(numbered(i + 1));
    --depth;
  }, nullptr);
  a->send(numbered(0));
  ASSERT_EQ(seen_by_a.size(), 100u);
  for (size_t k = 0; k < seen_by_a.size(); ++k) EXPECT_EQ(seen_by_a[k], static_cast<int>(2 * k + 1));
  EXPECT_LE(deepest.load(), 2);  // b's handler, and a's inside it: never deeper
  a->close("done");
}

TEST(LocalLink, ConcurrentSendersAreDeliveredOneAtATime) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  std::atomic<int> inside{0}, overlaps{0}, count{0};
  b->start([&](Message) {
    if (++inside > 1) ++overlaps;
    std::this_thread::yield();
    ++count;
    --inside;
  }, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, a = a] {
      for (int i = 0; i < 500; ++i) a->send(numbered(i));
    });
  for (auto& t : threads) t.join();
  b->wait_idle();
  EXPECT_EQ(count.load(), 2000);
  EXPECT_EQ(overlaps.load(), 0);
  a->close("done");
}

TEST(LocalLink, CloseFromEitherEndClosesBothOnce) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  std::vector<std::string> closed_a, closed_b;
  int delivered = 0;
  a->start([](Message) {}, [&](const std::string& why) { closed_a.push_back(why); });
  b->start([&](Message) { ++delivered; }, [&](const std::string& why) { closed_b.push_back(why); });
  b->close("the worker is stopping");
  a->close("again");
  EXPECT_TRUE(a->closed());
  EXPECT_TRUE(b->closed());
  EXPECT_EQ(closed_a, (std::vector<std::string>{"the worker is stopping"}));
  EXPECT_EQ(closed_b, (std::vector<std::string>{"the worker is stopping"}));
  a->send(numbered(1));  // dropped
  EXPECT_EQ(delivered, 0);
  // An end started after the close learns of it at once.
  auto [c, d] = make_local_link(io.get_executor());
  c->close("gone before start");
  std::string why;
  d->start([](Message) {}, [&](const std::string& w) { why = w; });
  EXPECT_EQ(why, "gone before start");
}

TEST(LocalLink, AHandlerThatThrowsClosesTheLinkSayingWhy) {
  boost::asio::io_context io;
  auto [a, b] = make_local_link(io.get_executor());
  std::string why;
  a->start([](Message) {}, [&](const std::string& w) { why = w; });
  b->start([](Message) { throw std::runtime_error("bad message"); }, nullptr);
  a->send(numbered(1));
  EXPECT_TRUE(a->closed());
  EXPECT_NE(why.find("bad message"), std::string::npos) << why;
  b->wait_idle();  // returns: nothing is being delivered
}

}  // namespace
}  // namespace bonfire::net
