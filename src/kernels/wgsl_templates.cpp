#include "kernels/wgsl_templates.h"

#include <cstddef>
#include <string_view>

#include "core/error.h"

namespace bonfire::kernels {

struct WgslTemplateFile {
  std::string_view name, text;
};
extern const WgslTemplateFile kWgslTemplateFiles[];
extern const size_t kWgslTemplateFileCount;

namespace {

const WgslTemplateFile* find(const std::string& name) {
  for (size_t i = 0; i < kWgslTemplateFileCount; ++i)
    if (kWgslTemplateFiles[i].name == name) return &kWgslTemplateFiles[i];
  return nullptr;
}

std::string expand(const std::string& name, std::vector<std::string>& stack) {
  for (const auto& open : stack)
    if (open == name) throw Error(ErrorCode::UnsupportedFeature, "WGSL template " + stack.front() + ": " + name + " includes itself");
  const WgslTemplateFile* f = find(name);
  if (!f)
    throw Error(ErrorCode::UnsupportedFeature,
                "no WGSL template " + name + (stack.empty() ? "" : " (included by " + stack.back() + ")") +
                    " in this build (src/kernels/*/wgsl/)");
  stack.push_back(name);
  const std::string_view directive = "//! include ";
  std::string out;
  std::string_view text = f->text;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end == std::string_view::npos ? text.size() : end + 1);
    text.remove_prefix(line.size());
    if (line.substr(0, directive.size()) == directive) {
      std::string other(line.substr(directive.size()));
      while (!other.empty() && (other.back() == '\n' || other.back() == '\r' || other.back() == ' ')) other.pop_back();
      out += expand(other, stack);
    } else {
      out += line;
    }
  }
  stack.pop_back();
  return out;
}

}  // namespace

std::string wgsl_template(const std::string& name) {
  std::vector<std::string> stack;
  return expand(name, stack);
}

std::vector<std::string> wgsl_template_names() {
  std::vector<std::string> out;
  for (size_t i = 0; i < kWgslTemplateFileCount; ++i) out.emplace_back(kWgslTemplateFiles[i].name);
  return out;
}

}  // namespace bonfire::kernels
