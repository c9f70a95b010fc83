#include "model/wgsl_renderer.h"

#include "core/error.h"
#include "kernels/wgsl_templates.h"
#include "model/chat_template/chat_template.h"

namespace bonfire {

std::string render_wgsl(const std::string& name, const nlohmann::ordered_json& vars) {
  const std::string source = kernels::wgsl_template(name);
  try {
    return ChatTemplate(source).render_vars(vars);
  } catch (const Error& e) {
    throw Error(e.code, name + ": " + e.what());
  }
}

}  // namespace bonfire
