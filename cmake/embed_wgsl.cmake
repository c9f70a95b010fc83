# Writes OUT, a C++ file that holds the GPU passes' WGSL templates
# (src/kernels/*/wgsl/*.wgsl.jinja) by file name, so the worker needs no
# files beside it (src/kernels/wgsl_templates.h reads them).
file(GLOB templates ${SRC_DIR}/src/kernels/*/wgsl/*.wgsl.jinja)
list(SORT templates)
set(text "// generated from src/kernels/*/wgsl/ by cmake/embed_wgsl.cmake; do not edit\n#include <cstddef>\n#include <string_view>\nnamespace bonfire::kernels {\nstruct WgslTemplateFile { std::string_view name, text; };\nextern const WgslTemplateFile kWgslTemplateFiles[];\nextern const size_t kWgslTemplateFileCount;\nconst WgslTemplateFile kWgslTemplateFiles[] = {\n")
foreach(path ${templates})
  get_filename_component(name ${path} NAME)
  file(READ ${path} body)
  string(APPEND text "  {\"${name}\", R\"bonfire_wgsl(${body})bonfire_wgsl\"},\n")
endforeach()
list(LENGTH templates count)
string(APPEND text "};\nconst size_t kWgslTemplateFileCount = ${count};\n}\n")
file(WRITE ${OUT} "${text}")
