// The GGUF reader and the GGUF -> HF weight store, against llama.cpp:
// goldens/gguf/tiny_llama.gguf was written by scripts/gen_gguf_goldens.py and
// listed by llama.cpp's own gguf reader (tiny_llama.json); names.json pairs
// GGUF and HF names through gguf-py's TensorNameMap. Damaged files must be
// refused with an Error naming the file, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "golden_util.h"
#include "model/gguf.h"
#include "model/gguf_names.h"

namespace bonfire {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path golden(const std::string& f) { return testing::source_dir() / "goldens/gguf" / f; }

uint64_t fnv1a64(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

std::shared_ptr<GgufFile> parse_bytes(const std::string& bytes, const std::string& name = "bad.gguf") {
  // An exact-size copy: reading one byte too far is out of bounds.
  auto buf = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  return GgufFile::parse(buf->data(), buf->size(), name, buf);
}

::testing::AssertionResult refused(const std::string& bytes, const std::string& what) {
  try {
    parse_bytes(bytes);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.rfind("bad.gguf: ", 0) != 0) return ::testing::AssertionFailure() << "message lacks the file name: " << m;
    if (m.find(what) == std::string::npos) return ::testing::AssertionFailure() << "message lacks \"" << what << "\": " << m;
    return ::testing::AssertionSuccess() << m;
  }
  return ::testing::AssertionFailure() << "accepted";
}

// --- the golden file, against llama.cpp's listing ---------------------------

TEST(GgufGolden, HeaderAndTensorsMatchLlamaCpp) {
  const json g = testing::read_json(golden("tiny_llama.json"));
  const auto f = GgufFile::open(golden("tiny_llama.gguf").string());
  const json& ll = g.at("llama_cpp");
  EXPECT_EQ(f->version(), ll.at("version").get<uint32_t>());
  EXPECT_EQ(f->alignment(), ll.at("alignment").get<uint64_t>());
  EXPECT_EQ(f->data_offset(), ll.at("data_offset").get<uint64_t>());
  EXPECT_EQ(f->architecture(), "llama");
  ASSERT_EQ(f->tensors().size(), ll.at("tensors").size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    const json& w = ll.at("tensors")[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w.at("name").get<std::string>());
    EXPECT_EQ(t.ggml_type, w.at("type").get<uint32_t>());
    EXPECT_EQ(t.offset, w.at("offset").get<uint64_t>());
    EXPECT_EQ(t.bytes, w.at("size").get<uint64_t>());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(d < t.ne.size() ? (int64_t)t.ne[d] : 1, w.at("ne")[d].get<int64_t>());
    Shape want(t.ne.rbegin(), t.ne.rend());
    EXPECT_EQ(t.shape, want);
    EXPECT_EQ(shape_str(f->tensor(t.name).shape), shape_str(g.at("tensors")[i].at("shape").get<Shape>()));
  }
  EXPECT_THROW(f->tensor("nope.weight"), Error);
}

TEST(GgufGolden, MetadataOfEveryType) {
  const json g = testing::read_json(golden("tiny_llama.json"));
  const auto f = GgufFile::open(golden("tiny_llama.gguf").string());
  const json& kv = g.at("llama_cpp").at("kv");
  ASSERT_EQ(f->metadata().size(), kv.size());
  for (const json& k : kv) {
    const std::string key = k.at("key");
    SCOPED_TRACE(key);
    GgufType t;
    ASSERT_TRUE(f->value_type(key, &t));
    EXPECT_EQ((int)t, k.at("type").get<int>());
    if (t == GgufType::Array) {
      GgufType et;
      ASSERT_TRUE(f->array_type(key, &et));
      EXPECT_EQ((int)et, k.at("element_type").get<int>());
      EXPECT_EQ(f->metadata().at(key).size(), k.at("n").get<size_t>());
    }
    const json& want = g.at("metadata").at(key);
    EXPECT_STREQ(gguf_type_name(t), want.at("type").get<std::string>().c_str());
    EXPECT_EQ(f->metadata().at(key), want.at("value"));
  }
  // Exact integers at the ends of their ranges; u64 stays unsigned.
  EXPECT_TRUE(f->metadata().at("test.u64").is_number_unsigned());
  EXPECT_EQ(f->metadata().at("test.u64").get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(f->metadata().at("test.i64").get<int64_t>(), INT64_MIN);
  EXPECT_EQ(f->metadata().at("test.f32").get<double>(), (double)0.1f);
  EXPECT_EQ(f->metadata().at("test.string").get<std::string>(), "h\xc3\xa9llo \xe2\x9c\x93");
}

TEST(GgufGolden, WeightsUnderHfNamesMatchLlamaCpp) {
  const json g = testing::read_json(golden("tiny_llama.json"));
  const auto f = GgufFile::open(golden("tiny_llama.gguf").string());
  const WeightStore store = load_gguf_weights(*f);
  const json& want = g.at("hf_weights");
  EXPECT_EQ(store.size(), want.size());
  for (auto it = want.begin(); it != want.end(); ++it) {
    SCOPED_TRACE(it.key());
    const Tensor* t = store.find(it.key());
    ASSERT_NE(t, nullptr);
    EXPECT_STREQ(dtype_name(t->dtype), it->at("dtype").get<std::string>().c_str());
    EXPECT_EQ(t->shape, it->at("shape").get<Shape>());
    const Tensor x = to_f32(*t);
    EXPECT_EQ(hex64(fnv1a64(x.data, x.numel() * 4)), it->at("fnv1a64").get<std::string>())
        << "first values " << x.f32()[0] << " " << x.f32()[1] << ", want " << it->at("first").dump();
  }
  // Views, not copies, except the two rope-permuted projections.
  const Tensor* v = store.find("model.layers.0.self_attn.v_proj.weight");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->data, f->tensor("blk.0.attn_v.weight").data);
  EXPECT_NE(store.find("model.layers.0.self_attn.q_proj.weight")->data, f->tensor("blk.0.attn_q.weight").data);
}

TEST(GgufGolden, LlamaCppLayoutWhenAsked) {
  const auto f = GgufFile::open(golden("tiny_llama.gguf").string());
  const WeightStore store = load_gguf_weights(*f, GgufLoadOptions{false});
  const Tensor* q = store.find("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q->data, f->tensor("blk.0.attn_q.weight").data);
  // The file really holds permuted rows: without the fix the floats differ.
  const json g = testing::read_json(golden("tiny_llama.json"));
  const Tensor x = to_f32(*q);
  EXPECT_NE(hex64(fnv1a64(x.data, x.numel() * 4)),
            g.at("hf_weights").at("model.layers.0.self_attn.q_proj.weight").at("fnv1a64").get<std::string>());
}

TEST(GgufGolden, StoreOutlivesTheFileObject) {
  WeightStore store;
  {
    const auto f = GgufFile::open(golden("tiny_llama.gguf").string());
    store = load_gguf_weights(*f);
  }
  const Tensor* t = store.find("model.layers.1.block_sparse_moe.experts.3.w2.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(to_f32(*t).numel(), 256 * 32);
}

TEST(GgufGolden, NamesMatchGgufPy) {
  const json g = testing::read_json(golden("names.json"));
  int pairs = 0;
  for (auto it = g.begin(); it != g.end(); ++it) {
    if (!it->is_object() || !it->contains("pairs")) continue;
    const std::string arch = it.key();
    for (const json& p : it->at("pairs")) {
      std::string hf;
      ASSERT_TRUE(gguf_to_hf_name(arch, p[0], &hf)) << arch << " " << p[0];
      EXPECT_EQ(hf, p[1].get<std::string>()) << arch << " " << p[0];
      ++pairs;
    }
    for (const json& u : it->at("unmapped")) {
      std::string hf;
      EXPECT_FALSE(gguf_to_hf_name(arch, u, &hf)) << arch << " " << u << " -> " << hf;
    }
  }
  EXPECT_GT(pairs, 300);
  std::string hf;
  EXPECT_FALSE(gguf_to_hf_name("no_such_arch", "token_embd.weight", &hf));
  EXPECT_FALSE(gguf_to_hf_name("llama", "blk.x.attn_q.weight", &hf));
}

TEST(GgufGolden, NestedArraysInVersion2) {
  const json g = testing::read_json(golden("nested_v2.json"));
  const auto f = GgufFile::open(golden("nested_v2.gguf").string());
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->data_offset(), g.at("data_offset").get<uint64_t>());
  EXPECT_EQ(f->metadata(), g.at("metadata"));
  GgufType et;
  ASSERT_TRUE(f->array_type("test.nested", &et));
  EXPECT_EQ(et, GgufType::Array);
  EXPECT_EQ(f->tensor("w").shape, (Shape{2, 32}));
}

// --- damaged files ----------------------------------------------------------

// Every cut of the golden file before its last tensor's end is refused; cuts
// in the trailing padding are not.
TEST(GgufBad, TruncatedAnywhere) {
  const std::string bytes = testing::slurp(golden("tiny_llama.gguf"));
  const auto f = parse_bytes(bytes, "full.gguf");
  uint64_t end = 0;
  for (const auto& t : f->tensors()) end = std::max(end, f->data_offset() + t.offset + t.bytes);
  auto whole = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  int refusals = 0;
  for (uint64_t len = 0; len < bytes.size(); len += (len < f->data_offset() + 512 ? 1 : 61)) {
    bool threw = false;
    try {
      if (len <= f->data_offset() + 512)
        parse_bytes(bytes.substr(0, len));
      else
        GgufFile::parse(whole->data(), len, "bad.gguf", whole);
    } catch (const Error& e) {
      threw = true;
      ASSERT_EQ(std::string(e.what()).rfind("bad.gguf: ", 0), 0u) << e.what();
    }
    ASSERT_EQ(threw, len < end) << "cut at " << len;
    refusals += threw;
  }
  EXPECT_GT(refusals, 1000);
}

TEST(GgufBad, MissingFileNamesThePath) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(GgufBad, TruncatedFileOnDisk) {
  const std::string bytes = testing::slurp(golden("tiny_llama.gguf"));
  const fs::path p = fs::temp_directory_path() / "bonfire_gguf_cut.gguf";
  std::ofstream(p, std::ios::binary).write(bytes.data(), 5000);
  try {
    GgufFile::open(p.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string() + ": truncated"), std::string::npos) << e.what();
  }
  fs::remove(p);
}

// A small GGUF writer for handcrafted damage.
struct Builder {
  uint32_t version = 3;
  std::string kvs;
  uint64_t n_kv = 0;
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<T> tensors;
  uint64_t data_bytes = 4096;
  int64_t n_tensors_override = -1, n_kv_override = -1;
  uint32_t alignment = 32;

  static std::string u32(uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); }
  static std::string u64(uint64_t v) { return std::string(reinterpret_cast<char*>(&v), 8); }
  static std::string str(const std::string& s) { return u64(s.size()) + s; }

  Builder& kv(const std::string& key, GgufType t, const std::string& payload) {
    kvs += str(key) + u32((uint32_t)t) + payload;
    ++n_kv;
    return *this;
  }
  Builder& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    tensors.push_back({name, std::move(ne), type, offset});
    return *this;
  }
  std::string bytes() const {
    std::string b = "GGUF" + u32(version);
    b += u64(n_tensors_override >= 0 ? (uint64_t)n_tensors_override : tensors.size());
    b += u64(n_kv_override >= 0 ? (uint64_t)n_kv_override : n_kv);
    b += kvs;
    for (const T& t : tensors) {
      b += str(t.name) + u32((uint32_t)t.ne.size());
      for (uint64_t d : t.ne) b += u64(d);
      b += u32(t.type) + u64(t.offset);
    }
    b.append((alignment - b.size() % alignment) % alignment, '\0');
    b.append(data_bytes, '\0');
    return b;
  }
};

TEST(GgufBad, BuilderBaselineIsAccepted) {
  Builder b;
  b.kv("general.architecture", GgufType::String, Builder::str("llama")).tensor("a", {32, 2}, 8, 0).tensor("b", {4}, 0, 96);
  const auto f = parse_bytes(b.bytes());
  EXPECT_EQ(f->tensor("a").shape, (Shape{2, 32}));
  EXPECT_EQ(f->tensor("a").dtype, DType::Q8_0);
}

TEST(GgufBad, Header) {
  Builder b;
  EXPECT_TRUE(refused("GGU", "truncated"));
  EXPECT_TRUE(refused("GGML" + Builder::u32(3), "not a GGUF file"));
  b.version = 1;
  EXPECT_TRUE(refused(b.bytes(), "version 1 is not supported"));
  b.version = 4;
  EXPECT_TRUE(refused(b.bytes(), "version 4 is not supported"));
  b.version = 0x03000000;
  EXPECT_TRUE(refused(b.bytes(), "big-endian"));
  b.version = 3;
  b.n_tensors_override = 1000000000000ll;
  EXPECT_TRUE(refused(b.bytes(), "tensor count is 1000000000000"));
  b.n_tensors_override = -1;
  b.n_kv_override = (int64_t)(~0ull >> 1);
  EXPECT_TRUE(refused(b.bytes(), "metadata count"));
}

TEST(GgufBad, Metadata) {
  const auto one = [](const std::string& key, GgufType t, const std::string& payload) {
    Builder b;
    b.kv(key, t, payload);
    return b.bytes();
  };
  EXPECT_TRUE(refused(one("k", GgufType::String, Builder::u64(1ull << 50) + "x"), "truncated: value of \"k\""));
  EXPECT_TRUE(refused(one("k", (GgufType)13, ""), "unknown value type 13"));
  EXPECT_TRUE(refused(one("", GgufType::U8, "\x01"), "is empty"));
  EXPECT_TRUE(refused(one("k", GgufType::Bool, "\x02"), "bool byte 2"));
  EXPECT_TRUE(refused(one("k", GgufType::Array, Builder::u32(0) + Builder::u64(1000000000000000ull)),
                      "array length of \"k\" is 1000000000000000"));
  EXPECT_TRUE(refused(one("k", GgufType::Array, Builder::u32(99) + Builder::u64(1)), "unknown value type 99"));
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += Builder::u32((uint32_t)GgufType::Array) + Builder::u64(1);
  EXPECT_TRUE(refused(one("k", GgufType::Array, deep), "nests arrays deeper"));
  Builder dup;
  dup.kv("k", GgufType::U8, "\x01").kv("k", GgufType::U8, "\x02");
  EXPECT_TRUE(refused(dup.bytes(), "\"k\" appears twice"));
  EXPECT_TRUE(refused(one("general.alignment", GgufType::U64, Builder::u64(32)), "must be a u32"));
  EXPECT_TRUE(refused(one("general.alignment", GgufType::U32, Builder::u32(48)), "not a power of 2"));
  EXPECT_TRUE(refused(one("general.alignment", GgufType::U32, Builder::u32(0)), "not a power of 2"));
}

TEST(GgufBad, TensorInfos) {
  const auto with = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset = 0) {
    Builder b;
    b.tensor("t", std::move(ne), type, offset);
    return b.bytes();
  };
  EXPECT_TRUE(refused(with({}, 0), "0 dimensions"));
  EXPECT_TRUE(refused(with({1, 1, 1, 1, 1}, 0), "5 dimensions"));
  EXPECT_TRUE(refused(with({4, 0}, 0), "size 0 along dimension 1"));
  EXPECT_TRUE(refused(with({4, 1ull << 63}, 0), "negative"));
  EXPECT_TRUE(refused(with({1ull << 40, 1ull << 40}, 0), "more elements than fit"));
  EXPECT_TRUE(refused(with({32}, 99), "unknown ggml type 99"));
  EXPECT_TRUE(refused(with({256}, 16), "iq2_xxs (ggml type 16), which bonfire cannot read"));
  EXPECT_TRUE(refused(with({48}, 8), "not a multiple of q8_0's block of 32"));
  EXPECT_TRUE(refused(with({1ull << 40, 1ull << 20}, 0), "truncated: tensor \"t\""));
  EXPECT_TRUE(refused(with({4}, 0, 8), "not a multiple of the alignment"));
  EXPECT_TRUE(refused(with({4}, 0, 1ull << 62), "truncated: tensor \"t\""));
  Builder dup;
  dup.tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32);
  EXPECT_TRUE(refused(dup.bytes(), "\"t\" appears twice"));
  Builder overlap;
  overlap.tensor("a", {64}, 0, 0).tensor("b", {4}, 0, 128);
  EXPECT_TRUE(refused(overlap.bytes(), "overlap"));
  Builder tight;  // alignment 1 can leave an f32 tensor at an address not a multiple of 4
  tight.alignment = 1;
  tight.kv("general.alignment", GgufType::U32, Builder::u32(1)).tensor("a", {4}, 24, 0);  // i8: any address
  const uint64_t d = parse_bytes(tight.bytes())->data_offset();
  tight.tensors[0].type = 0;
  tight.tensors[0].offset = d % 4 == 0 ? 1 : 0;
  EXPECT_TRUE(refused(tight.bytes(), "misaligned for f32"));
  Builder cut;
  cut.tensor("t", {32}, 0, 0);
  cut.data_bytes = 100;
  EXPECT_TRUE(refused(cut.bytes(), "truncated"));
}

// Random byte damage in the header region: never a crash, always either a
// file or an Error naming it.
TEST(GgufBad, RandomHeaderDamage) {
  const std::string bytes = testing::slurp(golden("tiny_llama.gguf"));
  const uint64_t header = parse_bytes(bytes, "ok.gguf")->data_offset();
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  int refused_count = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    const int flips = 1 + (int)(next() >> 60) % 4;
    for (int k = 0; k < flips; ++k) {
      const uint64_t at = (next() >> 11) % header;
      b[at] = (next() >> 40) & 1 ? (char)(next() >> 33) : (char)0xff;
    }
    try {
      parse_bytes(b);
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("bad.gguf: ", 0), 0u) << e.what();
      ++refused_count;
    }
  }
  EXPECT_GT(refused_count, 100);
}

}  // namespace
}  // namespace bonfire
