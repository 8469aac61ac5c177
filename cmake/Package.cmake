# `make deb` (SPEC §11.5): delayq_<version>_<arch>.deb through CPack, from a build configured with
# -DDELAYQ_DEB=ON -DCMAKE_INSTALL_PREFIX=/usr. The package holds the server, not the libraries:
#   /usr/bin/delayq
#   /etc/delayq/delayq.toml             (a conffile: packaging/delayq.toml)
#   /lib/systemd/system/delayq.service  (packaging/delayq.service, pointed at the config)
#   /usr/share/doc/delayq/              (README, docs/, copyright, changelog)
#   /usr/share/delayq/clients/go/       (the Go client's module, for a replace directive)
#   /usr/share/java/delayq-client.jar   (the Java client, when a JDK is found; its example in
#                                        /usr/share/doc/delayq/examples/java)
# and the maintainer scripts of packaging/deb: the delayq user, /var/lib/delayq (kept on remove
# and upgrade, deleted by purge). tests/packaging/deb_test.sh installs it into a fresh Debian 12
# root, serves, delivers, upgrades and finds the jobs still there.
set(DELAYQ_DEB_REVISION "1" CACHE STRING "The Debian revision of the package (0.2.0-REVISION)")

install(TARGETS delayq_cli RUNTIME DESTINATION bin)
install(FILES packaging/delayq.toml DESTINATION /etc/delayq)

# The unit for this layout, from the one hardened unit: the binary in /usr/bin, reading the
# config; the header that tells how to install it by hand replaced.
file(READ packaging/delayq.service unit)
string(REGEX REPLACE "^(#[^\n]*\n)+" "# delayq (the Debian package): settings in /etc/delayq/delayq.toml, or DELAYQ_* in /etc/default/delayq.\n" unit "${unit}")
string(REPLACE "/usr/local/bin/delayq serve --data /var/lib/delayq" "/usr/bin/delayq serve --config /etc/delayq/delayq.toml"
       unit "${unit}")
string(REPLACE "file:///usr/local/share/doc/delayq/" "file:///usr/share/doc/delayq/docs/" unit "${unit}")
file(WRITE ${PROJECT_BINARY_DIR}/deb/delayq.service "${unit}")
install(FILES ${PROJECT_BINARY_DIR}/deb/delayq.service DESTINATION /lib/systemd/system)

# A manual page from `delayq --help` (help2man): the commands and their options, as the binary has them.
find_program(HELP2MAN help2man REQUIRED)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/deb/delayq.1.gz
                   COMMAND ${HELP2MAN} --no-info --no-discard-stderr --name "a delay queue: jobs delivered at a chosen moment"
                           --output ${PROJECT_BINARY_DIR}/deb/delayq.1 $<TARGET_FILE:delayq_cli>
                   COMMAND gzip -9nf ${PROJECT_BINARY_DIR}/deb/delayq.1
                   DEPENDS delayq_cli)
add_custom_target(deb_manpage ALL DEPENDS ${PROJECT_BINARY_DIR}/deb/delayq.1.gz)
install(FILES ${PROJECT_BINARY_DIR}/deb/delayq.1.gz DESTINATION share/man/man1)

install(FILES README.md DESTINATION share/doc/delayq)
install(DIRECTORY docs/ DESTINATION share/doc/delayq/docs)
# Debian's copyright file names the license; the changelog says what this revision is.
file(WRITE ${PROJECT_BINARY_DIR}/deb/copyright
     "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: delayq\n\n"
     "Files: *\nCopyright: 2025-2026 The delayq authors\nLicense: Apache-2.0\n"
     " On Debian systems, the full text of the Apache License 2.0 is in\n /usr/share/common-licenses/Apache-2.0.\n")
install(FILES ${PROJECT_BINARY_DIR}/deb/copyright DESTINATION share/doc/delayq)
string(TIMESTAMP deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE ${PROJECT_BINARY_DIR}/deb/changelog.Debian
     "delayq (${PROJECT_VERSION}-${DELAYQ_DEB_REVISION}) stable; urgency=medium\n\n"
     "  * delayq ${PROJECT_VERSION}, built from this repository (make deb).\n\n"
     " -- delayq maintainers <maintainers@delayq.invalid>  ${deb_date}\n")
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz
                   COMMAND gzip -9nf -k ${PROJECT_BINARY_DIR}/deb/changelog.Debian
                   DEPENDS ${PROJECT_BINARY_DIR}/deb/changelog.Debian)
add_custom_target(deb_changelog ALL DEPENDS ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz)
install(FILES ${PROJECT_BINARY_DIR}/deb/changelog.Debian.gz DESTINATION share/doc/delayq)
install(FILES packaging/deb/lintian-overrides DESTINATION share/lintian/overrides RENAME delayq)

install(DIRECTORY clients/go/ DESTINATION share/delayq/clients/go PATTERN "*_test.go" EXCLUDE)
install(FILES clients/java/examples/OrderTimeout.java DESTINATION share/doc/delayq/examples/java)
find_package(Java 17 COMPONENTS Development)
if(Java_FOUND)
  include(UseJava)
  file(GLOB_RECURSE java_sources CONFIGURE_DEPENDS clients/java/src/main/java/*.java)
  # delayq-client-VERSION.jar and a delayq-client.jar link to it, as Debian's Java policy names jars.
  add_jar(delayq_client_jar SOURCES ${java_sources} OUTPUT_NAME delayq-client VERSION ${PROJECT_VERSION})
  install_jar(delayq_client_jar DESTINATION share/java)
else()
  message(WARNING "no JDK 17: the package leaves out the Java client's jar")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME delayq)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "delayq maintainers <maintainers@delayq.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "delay queue: jobs delivered at a chosen moment, at least once")
set(CPACK_PACKAGE_DESCRIPTION "A job handed in now becomes deliverable at a chosen moment (order timeouts,
reminders, retry back-off), is delivered at least once to a consumer that
acknowledges it, retried with back-off, and dead-lettered when its attempts
run out. An HTTP server with an embedded store, or Redis or PostgreSQL.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${DELAYQ_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/delayq/delayq")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, ca-certificates")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/postinst ${PROJECT_SOURCE_DIR}/packaging/deb/prerm
    ${PROJECT_SOURCE_DIR}/packaging/deb/postrm ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
