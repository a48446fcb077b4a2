# Compiler flags shared by every target of the project (not by dependencies).
add_library(dynamo_flags INTERFACE)
target_compile_options(dynamo_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual
  -Wimplicit-fallthrough)
if(DYNAMO_WERROR)
  target_compile_options(dynamo_flags INTERFACE -Werror)
endif()
if(DYNAMO_SANITIZE)
  # Applied to the whole build so that the libraries and the test binaries
  # agree on the runtime; Python itself is not instrumented.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(DYNAMO_FUZZ)
  # Coverage feedback for libFuzzer from every library the harnesses reach.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
