# Every dependency comes from the system (Debian packages); nothing is vendored.
find_package(Threads REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(fmt REQUIRED)
# The tools' command lines and JSON output (Debian's libcli11-dev and nlohmann-json3-dev, both
# header-only): linked only by the targets that parse flags or write JSON.
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
# The daemons' read-only HTTP endpoints (status page, /metrics): Debian's libcpp-httplib-dev.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

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
