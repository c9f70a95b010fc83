# SPEC_CPP: the vendored spec compiled into the binary (cmake/embed_spec.cmake
# writes it), so a release, native or WebAssembly, needs no files beside it.
set(SPEC_CPP ${CMAKE_BINARY_DIR}/generated/spec_data.cpp)
add_custom_command(
  OUTPUT ${SPEC_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${SPEC_CPP} -DSPEC_DIR=${CMAKE_SOURCE_DIR}/spec
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_spec.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/spec/ops-v3.json ${CMAKE_SOURCE_DIR}/spec/ir.schema.json
          ${CMAKE_SOURCE_DIR}/spec/kernels/qmoe.json
          ${CMAKE_SOURCE_DIR}/cmake/embed_spec.cmake)

# WGSL_CPP: the GPU passes' templates, compiled in the same way.
file(GLOB WGSL_TEMPLATES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/*/wgsl/*.wgsl.jinja)
set(WGSL_CPP ${CMAKE_BINARY_DIR}/generated/wgsl_templates_data.cpp)
add_custom_command(
  OUTPUT ${WGSL_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${WGSL_CPP} -DSRC_DIR=${CMAKE_SOURCE_DIR}
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake
  DEPENDS ${WGSL_TEMPLATES} ${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake)
