// The worker link's message codec (src/net/frame.h) and the join URL: what a
// malicious peer can send must fail cleanly, naming what was wrong.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "net/frame.h"
#include "net/model_hash.h"
#include "net/url.h"

using namespace bonfire;
using namespace bonfire::net;

namespace {

Tensor filled(const Shape& shape, float start) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = start + static_cast<float>(i);
  return t;
}

std::string error_of(const std::string& bytes, const Limits& limits = Limits{}) {
  try {
    decode_message(bytes, limits);
  } catch (const Error& e) {
    return std::string(error_code_name(e.code)) + ": " + e.what();
  }
  return "";
}

// A frame with `header` as given (no re-encoding) and `payload` after it.
std::string raw_frame(const std::string& header, const std::string& payload) {
  std::string out(4, '\0');
  const uint32_t n = static_cast<uint32_t>(header.size());
  std::memcpy(out.data(), &n, 4);
  return out + header + payload;
}

}  // namespace

TEST(NetFrame, RoundTripKeepsHeaderAndEveryBit) {
  Message m(nlohmann::json{{"type", "run"}, {"req", 7}, {"bind", {{"pos", 3}}}});
  m.tensors["in:tokens"] = filled({5}, 1);
  m.tensors["in:carry.L1.x"] = filled({5, 3}, -2.5f);
  m.tensors["empty"] = Tensor::empty({0, 4});
  Tensor special = Tensor::empty({3});
  special.f32()[0] = std::numeric_limits<float>::quiet_NaN();
  special.f32()[1] = -std::numeric_limits<float>::infinity();
  special.f32()[2] = 1e-42f;  // subnormal
  m.tensors["special"] = special;
  const Message back = decode_message(encode_message(m), Limits{});
  EXPECT_EQ(back.type(), "run");
  EXPECT_EQ(back.header["req"], 7);
  EXPECT_EQ(back.header["bind"]["pos"], 3);
  EXPECT_FALSE(back.header.contains("tensors"));
  ASSERT_EQ(back.tensors.size(), 4u);
  for (const auto& [name, t] : m.tensors) {
    const Tensor& b = back.tensors.at(name);
    EXPECT_EQ(b.shape, t.shape) << name;
    EXPECT_EQ(std::memcmp(b.data, t.data, t.numel() * 4), 0) << name;
  }
}

TEST(NetFrame, RefusesTruncatedAndLyingFrames) {
  Message m(nlohmann::json{{"type", "result"}});
  m.tensors["token"] = filled({4, 4}, 0);
  const std::string good = encode_message(m);
  EXPECT_NE(error_of(good.substr(0, 2)).find("shorter than"), std::string::npos);
  // Every truncation fails with a message, never a crash or a short tensor.
  for (size_t n = 0; n < good.size(); n += 7) EXPECT_NE(error_of(good.substr(0, n)), "") << n;
  EXPECT_NE(error_of(raw_frame("{not json", "")).find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of(raw_frame("[1,2]", "")).find("\"type\""), std::string::npos);
  const std::string past = error_of(
      raw_frame(R"({"type":"r","tensors":[{"name":"x","shape":[4],"offset":8,"bytes":16}]})", std::string(16, 'a')));
  EXPECT_NE(past.find("runs past the frame"), std::string::npos) << past;
  const std::string neg =
      error_of(raw_frame(R"({"type":"r","tensors":[{"name":"x","shape":[-1],"offset":0}]})", ""));
  EXPECT_NE(neg.find("bad shape"), std::string::npos) << neg;
  const std::string twice = error_of(raw_frame(
      R"({"type":"r","tensors":[{"name":"x","shape":[1],"offset":0},{"name":"x","shape":[1],"offset":0}]})",
      std::string(4, 'a')));
  EXPECT_NE(twice.find("twice"), std::string::npos) << twice;
  // A header length beyond the frame.
  std::string lying = good;
  lying[3] = '\x7f';
  EXPECT_NE(error_of(lying).find("runs past the frame"), std::string::npos);
}

TEST(NetFrame, LimitsApplyBeforeAnythingIsAllocated) {
  Limits small;
  small.max_tensor_elements = 100;
  small.max_total_bytes = 1000;
  const std::string huge =
      error_of(raw_frame(R"({"type":"r","tensors":[{"name":"x","shape":[100000,100000,100000],"offset":0}]})", ""),
               small);
  EXPECT_EQ(huge.rfind("too_large", 0), 0u) << huge;
  Message m(nlohmann::json{{"type", "r"}});
  for (int i = 0; i < 4; ++i) m.tensors["t" + std::to_string(i)] = filled({80}, 0);
  const std::string total = error_of(encode_message(m), small);
  EXPECT_NE(total.find("exceed 1000 bytes"), std::string::npos) << total;
  Limits rank;
  rank.max_rank = 2;
  EXPECT_NE(error_of(raw_frame(R"({"type":"r","tensors":[{"name":"x","shape":[1,1,1],"offset":0}]})", ""), rank)
                .find("axes"),
            std::string::npos);
}

TEST(NetUrl, JoinUrls) {
  Url u = parse_join_url("http://10.0.0.2:8080");
  EXPECT_EQ(u.host, "10.0.0.2");
  EXPECT_EQ(u.port, "8080");
  EXPECT_EQ(u.path, "/api/v3/worker");
  u = parse_join_url("ws://example.org:9/api/v3/worker");
  EXPECT_EQ(u.host, "example.org");
  EXPECT_EQ(u.port, "9");
  EXPECT_EQ(u.base(), "http://example.org:9");
  EXPECT_EQ(parse_join_url("http://h").port, "80");
  EXPECT_THROW(parse_join_url("ftp://h:1"), Error);
  EXPECT_THROW(parse_join_url("http://:1"), Error);
  EXPECT_THROW(parse_join_url("http://h:x1"), Error);
  EXPECT_FALSE(parse_join_url("http://h:1").tls);
  EXPECT_FALSE(parse_join_url("ws://h:1").tls);
}

TEST(NetUrl, TlsJoinUrls) {
  Url u = parse_join_url("https://coordinator.example:8443");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.host, "coordinator.example");
  EXPECT_EQ(u.port, "8443");
  EXPECT_EQ(u.path, "/api/v3/worker");
  EXPECT_EQ(u.base(), "https://coordinator.example:8443");  // downloads go over HTTPS too
  u = parse_join_url("wss://127.0.0.1:9/api/v3/worker");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.path, "/api/v3/worker");
  EXPECT_EQ(u.base(), "https://127.0.0.1:9");
  EXPECT_EQ(parse_join_url("https://h").port, "443");
  EXPECT_EQ(parse_join_url("wss://h/").port, "443");
  EXPECT_THROW(parse_join_url("https://:1"), Error);
  EXPECT_THROW(parse_join_url("wss://h:443x"), Error);
  EXPECT_THROW(parse_join_url("tls://h:1"), Error);
}

TEST(NetModelHash, Sha256AndSafeNames) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_TRUE(safe_name("model.safetensors"));
  EXPECT_FALSE(safe_name("../etc/passwd"));
  EXPECT_FALSE(safe_name("a/b"));
  EXPECT_FALSE(safe_name(".."));
  EXPECT_FALSE(safe_name(""));
  EXPECT_FALSE(safe_name("a b"));
}
