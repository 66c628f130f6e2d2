# Installation: the shared library, the public headers, the master daemon, and a CMake package so
# that find_package(longhaul) gives the target longhaul::longhaul.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LONGHAUL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/longhaul)

install(TARGETS longhaul EXPORT longhaulTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/longhaul/longhaul.h include/longhaul/longhaul.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/longhaul)
if(LONGHAUL_TOOLS)
  install(TARGETS longhaul-master RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT longhaulTargets NAMESPACE longhaul:: DESTINATION ${LONGHAUL_CMAKE_DIR})

configure_package_config_file(cmake/longhaulConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/longhaulConfig.cmake
                              INSTALL_DESTINATION ${LONGHAUL_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/longhaulConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/longhaulConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/longhaulConfigVersion.cmake
        DESTINATION ${LONGHAUL_CMAKE_DIR})
