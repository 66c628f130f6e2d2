# Every dependency comes from the system (Debian packages); nothing is vendored.
find_package(Threads REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(fmt REQUIRED)
# JSON (Debian's nlohmann-json3-dev, header-only): the master's status JSON and the tools' output.
find_package(nlohmann_json 3.11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# Only the tools, benchmarks and tests need these (the library does not): the tools' command lines
# (libcli11-dev, header-only), the churn tool's event loop (libuv1-dev), and the HTTP client that
# the tests read the status page with (libcpp-httplib-dev).
if(LONGHAUL_TOOLS)
  find_package(CLI11 CONFIG REQUIRED)
  pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
endif()
if(LONGHAUL_TESTS)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
endif()

# Standalone Asio is header-only and ships no CMake config.
find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
add_library(asio INTERFACE)
target_include_directories(asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
target_compile_definitions(asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
target_link_libraries(asio INTERFACE Threads::Threads)
# Asio 1.22 enables co_await for clang only with <experimental/coroutine>, which libstdc++ lacks;
# clang 14 supports C++20 coroutines with <coroutine>, so say so.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_definitions(asio INTERFACE ASIO_HAS_CO_AWAIT=1)
endif()

if(LONGHAUL_TESTS)
  find_package(GTest REQUIRED)
endif()
if(LONGHAUL_BENCH)
  find_package(benchmark REQUIRED)
endif()
