// What the `bonfire` command is given (PROTOCOL.md, "Command line"), through
// the real binary: a directory where a file belongs, JSON nested deep enough
// to overflow a recursive reader's stack, a pipe for a file, arguments left
// out, an endless text file, a malformed messages file, and the session
// folder's cleanup. Each is refused in the command's usual form with exit
// status 1 (2 for a usage error), never a crash or a silent success.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "golden_util.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::run_command;

const std::string kBin = BONFIRE_BINARY;
constexpr const char* kCall = R"({"inputs": {"x": {"shape": [1], "data": [1]}}, "nodes": [{"id": "a", "op": "relu", "in": ["x"]}],
  "outputs": ["a"]})";

std::string nested(size_t n) { return std::string(n, '[') + std::string(n, ']'); }

class InputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bonfire_input_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // `bonfire ARGS`: its stdout (stderr dropped) and exit status.
  std::pair<std::string, int> bonfire(const std::string& args) { return run_command(kBin + " " + args + " 2>/dev/null"); }
  // The error JSON a refused command prints, after checking it exited 1.
  json refusal(const std::string& args) {
    auto [out, status] = bonfire(args);
    EXPECT_EQ(status, 1) << args << "\n" << out;
    const json j = json::parse(out, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << args << "\n" << out;
    return j.is_object() ? j : json::object();
  }
  static std::string demo() { return (testing::source_dir() / "models" / "demo").string(); }
  static std::string qmoe() { return (testing::source_dir() / "spec" / "kernels" / "qmoe.json").string(); }

  fs::path dir_;
};

std::string message(const json& error) { return error.value("error", ""); }

TEST_F(InputCli, DirectoryWhereAFileBelongsIsNamed) {
  const std::string d = (dir_ / "folder").string();
  fs::create_directories(d);
  const std::string is_dir = d + " is a directory";
  for (const std::string& args :
       {"tokenize --model " + demo() + " --file " + d, "perplexity --model " + demo() + " --file " + d,
        "graph run " + d + " --session-dir ''", "ir lower " + d, "kernel select " + qmoe() + " --shapes @" + d,
        "template --model " + demo() + " --messages " + d}) {
    const json e = refusal(args);
    EXPECT_EQ(e.value("code", ""), "bad_graph") << args;
    EXPECT_EQ(message(e), is_dir) << args;
  }
  auto [out, status] = bonfire("ir validate " + d);  // its own form: one line naming the file
  EXPECT_EQ(status, 1);
  EXPECT_EQ(out, is_dir + "\n");
}

TEST_F(InputCli, DeepJsonIsRefusedNotACrash) {
  const std::string deep = nested(200000);
  const std::string too_deep = "JSON nested deeper than 64 levels";
  const std::string deep_file = write("deep.json", deep);

  auto [out, status] = bonfire("ir validate " + deep_file);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(out, deep_file + ": " + too_deep + "\n");

  json call = json::parse(kCall);
  std::string text = call.dump();
  const std::string in_param = write("param.json", text.replace(text.find("\"in\""), 0, "\"params\": {\"k\": " + deep + "}, "));
  text = call.dump();
  const std::string in_bind = write("bind.json", text.insert(text.size() - 1, ", \"bind\": {\"k\": " + deep + "}"));
  for (const std::string& file : {in_param, in_bind}) {
    const json e = refusal("graph run " + file + " --session-dir ''");
    EXPECT_EQ(message(e), file + ": " + too_deep) << file;
  }
  EXPECT_EQ(message(refusal("graph run - --session-dir '' < " + in_param)), "stdin: " + too_deep);
  EXPECT_EQ(message(refusal("ir lower - < " + deep_file)), "stdin: " + too_deep);

  // A session file of the folder is JSON from outside too.
  fs::create_directories(dir_ / "sessions");
  write("sessions/s.session.json", "{\"k\": " + deep + "}");
  call["session"] = "s";
  const std::string with_session = write("session.json", call.dump());
  EXPECT_EQ(message(refusal("graph run " + with_session + " --session-dir " + (dir_ / "sessions").string())),
            (dir_ / "sessions" / "s.session.json").string() + ": " + too_deep);

  const std::string shapes = R"('{"input": [1, 128]}')";
  EXPECT_EQ(message(refusal("kernel select " + qmoe() + " --shapes " + shapes + " --attrs @" + deep_file)),
            deep_file + ": " + too_deep);
  EXPECT_EQ(message(refusal("kernel select " + qmoe() + " --shapes '" + nested(100) + "'")), "--shapes: " + too_deep);
}

TEST_F(InputCli, PipeIsReadLikeAFile) {
  const std::string m = write("m.json", R"([{"role": "user", "content": "Who made the heaven?"}])");
  auto [want, st] = bonfire("template --model " + demo() + " --messages " + m);
  ASSERT_EQ(st, 0) << want;
  auto [got, status] = bonfire("template --model " + demo() + " --messages /dev/stdin < /dev/null");
  // (An empty stdin is empty JSON: refused, not "cannot be read".)
  EXPECT_EQ(status, 1);
  EXPECT_NE(got.find("malformed JSON"), std::string::npos) << got;
  std::tie(got, status) = run_command("cat " + m + " | " + kBin + " template --model " + demo() + " --messages /dev/stdin");
  EXPECT_EQ(status, 0) << got;
  EXPECT_EQ(got, want);
  // Nothing that never ends is read past the limit (64 MB for JSON).
  const json e = refusal("template --model " + demo() + " --messages /dev/zero");
  EXPECT_EQ(e.value("code", ""), "too_large") << e;
}

// A decode step is one token: `ir lower --tokens 8` asks for a prefill.
TEST_F(InputCli, LowerDecodeTakesOneToken) {
  const std::string doc = (testing::source_dir() / "tests" / "ir" / "docs" / "llama.json").string();
  const json e = refusal("ir lower " + doc + " --mode decode --tokens 8");
  EXPECT_NE(message(e).find("--tokens 8 is for a prefill step"), std::string::npos) << e.dump();
  auto [out, status] = bonfire("ir lower " + doc + " --mode prefill --tokens 8");
  EXPECT_EQ(status, 0) << out;
}

TEST_F(InputCli, TokenizeNeedsTextOrFile) {
  for (const std::string& args : {std::string(""), " --text a --file " + write("t.txt", "a")}) {
    const json e = refusal("tokenize --model " + demo() + args);
    EXPECT_EQ(message(e), "give --text TEXT or --file F (one of them)") << args;
  }
  auto [out, status] = bonfire("tokenize --model " + demo() + " --text ''");  // the empty text is a text
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(json::parse(out, nullptr, false).is_array()) << out;
}

// A text without end (/dev/zero) is refused at the limit, not read until
// memory runs out.
TEST_F(InputCli, EndlessTextFileIsRefusedAtTheLimit) {
  for (const std::string& cmd : {std::string("tokenize --model ") + demo() + " --file /dev/zero",
                                 std::string("perplexity --model ") + demo() + " --file /dev/zero"}) {
    const json e = refusal(cmd);
    EXPECT_EQ(e.value("code", ""), "too_large") << cmd << "\n" << e.dump();
    EXPECT_NE(message(e).find("/dev/zero"), std::string::npos) << cmd << "\n" << e.dump();
  }
}

TEST_F(InputCli, BenchNeedsASubcommand) {
  auto [out, status] = run_command(kBin + " bench 2>&1");
  EXPECT_EQ(status, 2);  // a usage error, as for graph, ir and kernel
  EXPECT_NE(out.find("subcommand is required"), std::string::npos) << out;
}

TEST_F(InputCli, TemplateNamesTheBadMessage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([{"content": "hi"}])", "messages[0].role is missing"},
      {R"([{"role": "user", "content": "a"}, {"role": "assistant"}])", "messages[1].content is missing"},
      {R"([{"role": 5, "content": "hi"}])", "messages[0].role must be a string"},
      {R"([{"role": "user", "content": 5}])", "messages[0].content must be a string, null or a list of parts"},
      {R"([1])", "messages[0] must be an object {role, content}"},
      {R"({"role": "user", "content": "hi"})", "must be a JSON list of messages"},
  };
  for (const auto& [text, want] : cases) {
    const std::string m = write("m.json", text);
    EXPECT_EQ(message(refusal("template --model " + demo() + " --messages " + m)), m + ": " + want) << text;
  }
  // An assistant turn that only calls tools has a null content (as
  // transformers writes it): the template decides what to do with it (the
  // demo's, which has no tools, cannot add null to a string).
  const std::string tools = write("m.json", R"([{"role": "user", "content": "hi"},
    {"role": "assistant", "content": null, "tool_calls": []}, {"role": "user", "content": "again"}])");
  const std::string why = message(refusal("template --model " + demo() + " --messages " + tools));
  EXPECT_EQ(why.find("messages[1]"), std::string::npos) << why;
  EXPECT_NE(why.find("null"), std::string::npos) << why;
}

// The session folder may hold the user's own files: expiry removes only the
// session files graph run writes (ID.session.json, and the .tmp of a write
// that died), when idle long enough.
TEST_F(InputCli, SessionExpiryRemovesOnlySessionFiles) {
  const fs::path sessions = dir_ / "sessions";
  fs::create_directories(sessions / "old_folder");
  for (const char* name : {"old.session.json", "old.session.json.tmp", "fresh.session.json", "notes.txt"})
    std::ofstream(sessions / name) << "{}";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* name : {"old.session.json", "old.session.json.tmp", "notes.txt", "old_folder"})
    fs::last_write_time(sessions / name, old);

  auto [out, status] = bonfire("graph run " + write("call.json", kCall) + " --session-dir " + sessions.string());
  EXPECT_EQ(status, 0) << out;
  EXPECT_FALSE(fs::exists(sessions / "old.session.json"));
  EXPECT_FALSE(fs::exists(sessions / "old.session.json.tmp"));
  EXPECT_TRUE(fs::exists(sessions / "fresh.session.json"));  // not idle long enough
  EXPECT_TRUE(fs::exists(sessions / "notes.txt"));
  EXPECT_TRUE(fs::is_directory(sessions / "old_folder"));
}

}  // namespace
}  // namespace bonfire
