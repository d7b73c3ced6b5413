# One warnings function for every first-party target. CI turns warnings into errors
# (PADDOCK_WERROR=ON, set by scripts/test when CI=true).
option(PADDOCK_WERROR "Treat compiler warnings as errors" OFF)

function(paddock_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Woverloaded-virtual -Wnon-virtual-dtor
    -Wno-missing-field-initializers)
  if(PADDOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# A first-party library or executable: warnings on, project include root visible.
function(paddock_target target)
  paddock_set_warnings(${target})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# Adds each listed subdirectory. A folder named here without its CMakeLists.txt is a configure
# error, never skipped: a library that is missing or broken must fail the build, not vanish from it.
function(paddock_add_subdirectories)
  foreach(dir ${ARGN})
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      message(FATAL_ERROR "${CMAKE_CURRENT_SOURCE_DIR}/${dir} has no CMakeLists.txt; add one or remove the folder from this list")
    endif()
    add_subdirectory(${dir})
  endforeach()
endfunction()

# Qt hygiene for console targets (models/, views/, app/).
function(paddock_qt_target target)
  paddock_target(${target})
  set_target_properties(${target} PROPERTIES AUTOMOC ON)
  target_compile_definitions(${target} PRIVATE QT_NO_CAST_FROM_ASCII QT_NO_NARROWING_CONVERSIONS_IN_CONNECT
    QT_NO_URL_CAST_FROM_STRING)
endfunction()
