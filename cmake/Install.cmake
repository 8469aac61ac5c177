# `cmake --install`: the public headers, the libraries, the `delayq` binary, a CMake package
# (find_package(delayq CONFIG) with delayq::client and delayq::engine) and pkg-config files
# (delayq, delayq-engine). tests/packaging builds examples/ against the installed prefix.
include(GNUInstallDirs)
# Libraries go to PREFIX/lib whatever the platform's multiarch directory: the pkg-config files find
# them relative to themselves.
include(CMakePackageConfigHelpers)

set_target_properties(delayq_client PROPERTIES EXPORT_NAME client)
set_target_properties(delayq_store_embedded PROPERTIES EXPORT_NAME engine)
add_library(delayq::client ALIAS delayq_client)
add_library(delayq::engine ALIAS delayq_store_embedded)

# The Kafka producer's header stays out: its library (librdkafka) is not part of the package.
install(DIRECTORY include/delayq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h"
        PATTERN "kafka" EXCLUDE)
install(TARGETS delayq_core delayq_version delayq_wire delayq_client EXPORT delayqClientTargets
        ARCHIVE DESTINATION lib)
install(TARGETS delayq_store_embedded delayq_schedule EXPORT delayqEngineTargets ARCHIVE DESTINATION lib)
install(TARGETS delayq_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(cmake_dir lib/cmake/delayq)
install(EXPORT delayqClientTargets NAMESPACE delayq:: DESTINATION ${cmake_dir})
install(EXPORT delayqEngineTargets NAMESPACE delayq:: DESTINATION ${cmake_dir})
configure_package_config_file(cmake/delayqConfig.cmake.in ${PROJECT_BINARY_DIR}/delayqConfig.cmake
                              INSTALL_DESTINATION ${cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/delayqConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/delayqConfig.cmake ${PROJECT_BINARY_DIR}/delayqConfigVersion.cmake
        DESTINATION ${cmake_dir})

foreach(pc delayq delayq-engine)
  configure_file(cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION lib/pkgconfig)  # ${pcfiledir}/../.. is the prefix
endforeach()
