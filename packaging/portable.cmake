# The portable muster (docs/install.md, "The portable programs"): muster, musterd and the demo
# worker linked again (no recompilation) to load their shared libraries only from
# ${MU_PORTABLE_PREFIX}/lib, with the dynamic loader of that directory:
#   PT_INTERP = <prefix>/lib/ld-linux-x86-64.so.2, DT_RPATH = <prefix>/lib
# packaging/bundle.sh then copies the libraries they need (ldd) and that loader beside them, so
# the tree <prefix>/{bin,lib,share/muster/components} runs in a root filesystem that holds
# nothing else: no libc, no shell. DT_RPATH (not RUNPATH) so that the libraries' own
# dependencies (libssl -> libcrypto) are found there too.
# Not in sanitizer builds (the sanitizer runtimes expect the host's loader).
set(MU_PORTABLE_PREFIX "/muster" CACHE PATH "where the portable bundle lives in an image")
if(MU_ASAN OR MU_UBSAN OR MU_FUZZ)
  return()
endif()

set(MU_PORTABLE_DIR ${CMAKE_BINARY_DIR}/portable)
set(mu_portable_link -Wl,--dynamic-linker=${MU_PORTABLE_PREFIX}/lib/ld-linux-x86-64.so.2
    -Wl,-rpath,${MU_PORTABLE_PREFIX}/lib -Wl,--disable-new-dtags)
add_executable(muster_portable ${CMAKE_SOURCE_DIR}/launcher/main.c)
target_link_libraries(muster_portable PRIVATE mulauncher_cmd)
add_executable(musterd_portable ${CMAKE_SOURCE_DIR}/rendezvous/main.c)
target_link_libraries(musterd_portable PRIVATE murv murv_persist murv_security murv_c10d)
add_executable(ring_allreduce_portable ${CMAKE_SOURCE_DIR}/examples/ring_allreduce.c)
target_link_libraries(ring_allreduce_portable PRIVATE muclient mucommon)
foreach(t muster musterd ring_allreduce)
  target_link_options(${t}_portable PRIVATE ${mu_portable_link})
  set_target_properties(${t}_portable PROPERTIES OUTPUT_NAME ${t}
                        RUNTIME_OUTPUT_DIRECTORY ${MU_PORTABLE_DIR}/stage)
endforeach()

# The bundle: build/portable/muster/{bin,lib,share} (what goes under the prefix).
add_custom_command(
  OUTPUT ${MU_PORTABLE_DIR}/bundle.stamp
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bundle.sh ${MU_PORTABLE_DIR}/stage
          ${MU_PORTABLE_DIR}/muster ${CMAKE_SOURCE_DIR}/components
  COMMAND ${CMAKE_COMMAND} -E touch ${MU_PORTABLE_DIR}/bundle.stamp
  DEPENDS muster_portable musterd_portable ring_allreduce_portable
          ${CMAKE_CURRENT_SOURCE_DIR}/bundle.sh
  COMMENT "Bundling the portable muster into ${MU_PORTABLE_DIR}/muster")
add_custom_target(portable ALL DEPENDS ${MU_PORTABLE_DIR}/bundle.stamp)

# The stand-in user program of the two-image pod test: static, libc only (tests/fixtures).
add_executable(sum_static ${CMAKE_SOURCE_DIR}/tests/fixtures/workers/sum_static.c)
target_link_options(sum_static PRIVATE -static)
set_target_properties(sum_static PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${MU_PORTABLE_DIR}/test)
