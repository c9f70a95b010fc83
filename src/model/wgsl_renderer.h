// The GPU passes' WGSL templates rendered by the project's one template
// engine (the chat templates' Jinja, model/chat_template), as the kernel
// package's `.wgsl.jinja` names ask. kernels/gpu_plan.h takes this function
// as its TemplateRenderer: the planner's layer comes before this one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace bonfire {

// wgsl_template(name) (its includes expanded) rendered with `vars`; an error
// names the template and what failed.
std::string render_wgsl(const std::string& name, const nlohmann::ordered_json& vars);

}  // namespace bonfire
