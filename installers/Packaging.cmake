# Install rules and Debian packages (CPack). Three packages, as users install them:
#   paddock         the console (component console); Depends paddock-broker
#   paddock-broker  paddockd, paddockctl, the user unit paddockd.service, the demo playbooks, the
#                   example broker and policy configs, the docs; Recommends paddock-pool
#   paddock-pool    paddock-pool, paddock-sandbox-init, the user and system units paddock-pool.service;
#                   Depends bubblewrap, Recommends runsc, crun, btrfs-progs
# A laptop installs paddock; an execution host installs paddock-pool alone. docs/install.md says
# the same for users.
#
# The layout is fixed relative to the prefix because the programs find their files relative to
# their own executable (common/install_paths.h): bin/, libexec/paddock/, share/paddock/. The
# GNUInstallDirs variables are therefore not used for those three.
#
# Build the packages: cmake --build build --target package (or cpack --config build/CPackConfig.cmake).

include(GNUInstallDirs)

set(paddock_bindir bin)
set(paddock_libexecdir libexec/paddock)
set(paddock_datadir share/paddock)
set(paddock_docdir share/doc/paddock)
set(paddock_packaging ${PROJECT_SOURCE_DIR}/installers)

# --- programs ---------------------------------------------------------------------------------
if(PADDOCK_BUILD_CONSOLE)
  install(TARGETS paddock RUNTIME DESTINATION ${paddock_bindir} COMPONENT console)
endif()
install(TARGETS paddockd paddockctl RUNTIME DESTINATION ${paddock_bindir} COMPONENT broker)
install(TARGETS paddock-pool RUNTIME DESTINATION ${paddock_bindir} COMPONENT pool)
install(TARGETS paddock-sandbox-init RUNTIME DESTINATION ${paddock_libexecdir} COMPONENT pool)

# --- data -------------------------------------------------------------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/playbooks/ DESTINATION ${paddock_datadir}/playbooks
  COMPONENT broker FILES_MATCHING PATTERN "*.toml")
set(paddock_examples ${PROJECT_SOURCE_DIR}/resources/examples)
install(FILES ${paddock_examples}/broker.toml ${paddock_examples}/policy.toml DESTINATION ${paddock_datadir}/examples
  COMPONENT broker)
# An execution host has only paddock-pool: its example config (and the system unit's flags file)
# comes with it.
install(FILES ${paddock_examples}/pool.toml ${paddock_packaging}/examples/paddock-pool.default
  DESTINATION ${paddock_datadir}/examples COMPONENT pool)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${paddock_docdir} COMPONENT broker)
if(EXISTS ${PROJECT_SOURCE_DIR}/CHANGELOG.md)
  install(FILES ${PROJECT_SOURCE_DIR}/CHANGELOG.md DESTINATION ${paddock_docdir} COMPONENT broker)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${paddock_docdir}/docs COMPONENT broker
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png")

# --- copyright (Debian's machine-readable format), one per package, where Debian keeps it -------
install(FILES ${paddock_packaging}/debian/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/paddock-broker COMPONENT broker)
install(FILES ${paddock_packaging}/debian/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/paddock-pool COMPONENT pool)
if(PADDOCK_BUILD_CONSOLE)
  install(FILES ${paddock_packaging}/debian/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/paddock COMPONENT console)
endif()

# --- desktop integration (the console) ---------------------------------------------------------
if(PADDOCK_BUILD_CONSOLE)
  install(FILES ${paddock_packaging}/desktop/dev.paddock.Paddock.desktop
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/applications COMPONENT console)
  install(FILES ${paddock_packaging}/desktop/dev.paddock.Paddock.metainfo.xml
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/metainfo COMPONENT console)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/paddock.svg
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/icons/hicolor/scalable/apps RENAME dev.paddock.Paddock.svg
    COMPONENT console)
  foreach(size 64 128 256)
    install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/paddock-${size}.png
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/icons/hicolor/${size}x${size}/apps RENAME dev.paddock.Paddock.png
      COMPONENT console)
  endforeach()
endif()

# --- systemd units ----------------------------------------------------------------------------
# Their ExecStart names the installed binary, so they are written at install time, when the real
# prefix is known: /usr for the packages (CPack installs with DESTDIR), or the prefix of
# `cmake --install build --prefix DIR`.
function(paddock_install_unit template destination name component)
  set(staged ${CMAKE_BINARY_DIR}/packaging/systemd/${destination}/${name})
  install(CODE "
    set(PADDOCK_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${paddock_bindir}\")
    set(PADDOCK_DATADIR \"\${CMAKE_INSTALL_PREFIX}/${paddock_datadir}\")
    set(PADDOCK_DOCDIR \"\${CMAKE_INSTALL_PREFIX}/${paddock_docdir}\")
    configure_file(\"${paddock_packaging}/systemd/${template}\" \"${staged}\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/${destination}\" TYPE FILE FILES \"${staged}\")
    " COMPONENT ${component})
endfunction()
paddock_install_unit(paddockd.service.in user paddockd.service broker)
paddock_install_unit(paddock-pool.user.service.in user paddock-pool.service pool)
paddock_install_unit(paddock-pool.system.service.in system paddock-pool.service pool)

# --- Debian packages --------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME paddock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The Paddock developers")
set(CPACK_PACKAGE_CONTACT "The Paddock developers <maintainers@paddock.dev>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)   # RelWithDebInfo binaries are mostly debug info
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Each package's description: its first line is the synopsis, the rest the extended description
# (CPackDeb indents it). CPACK_PACKAGE_DESCRIPTION_SUMMARY stays unset, or CPack would put it above
# every package's own synopsis.
set(CPACK_COMPONENTS_ALL broker pool)
if(PADDOCK_BUILD_CONSOLE)
  list(PREPEND CPACK_COMPONENTS_ALL console)
endif()

set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(paddock_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)   # name_version-release_arch.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://paddock.dev/")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Library dependencies from dpkg-shlibdeps, added to the declared ones below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg 1.21 (Debian 12) reads zstd; it packs several times faster than xz on two cores.
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CONSOLE_PACKAGE_NAME paddock)
set(CPACK_DEBIAN_CONSOLE_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_CONSOLE_PACKAGE_DEPENDS "paddock-broker (= ${paddock_deb_version})")
set(CPACK_DEBIAN_CONSOLE_DESCRIPTION "control console for fleets of AI agents
Paddock watches and steers AI agents whose every command runs in a sandbox on
an execution host, never on the machine you watch from. This is the Qt
console: live sessions, review queue, decisions, pools and costs. It talks to
the broker (paddock-broker), which it can start on first run.")

set(CPACK_DEBIAN_BROKER_PACKAGE_NAME paddock-broker)
set(CPACK_DEBIAN_BROKER_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_BROKER_PACKAGE_RECOMMENDS "paddock-pool (= ${paddock_deb_version})")
set(CPACK_DEBIAN_BROKER_DESCRIPTION "broker daemon and command line of Paddock
paddockd keeps each agent session's durable log in SQLite, runs agents one
step at a time and sends their commands to sandbox pools; paddockctl drives
it from a shell. Includes the systemd user unit paddockd.service, the demo
playbooks and example configurations. The embedded default configuration
uses a local pool (paddock-pool, recommended).")

set(CPACK_DEBIAN_POOL_PACKAGE_NAME paddock-pool)
set(CPACK_DEBIAN_POOL_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_POOL_PACKAGE_DEPENDS "bubblewrap")
set(CPACK_DEBIAN_POOL_PACKAGE_RECOMMENDS "runsc, crun, btrfs-progs")
set(CPACK_DEBIAN_POOL_DESCRIPTION "sandbox pool agent of Paddock
paddock-pool keeps warm sandboxes (bubblewrap, gVisor runsc, crun) with
cgroup memory, cpu and pids limits and btrfs disk limits, and runs Paddock
agents' commands in them for brokers that connect over gRPC (TLS and tokens
for remote brokers). Install it alone on an execution host (system unit
paddock-pool.service, config /etc/paddock/pool.toml), or with paddock-broker
for local execution (user unit paddock-pool.service).")

include(CPack)
