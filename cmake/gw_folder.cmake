# gw_folder(NAME [PROGRAM] [TARGET target] SOURCES files... FACE headers...
#           DEPENDS targets...)
#
# One folder of a layered tree (gateway/, store/, tools/; docs/ARCHITECTURE.md, "The
# gateway's layers"), declared in the folder's own CMakeLists.txt, where its sources are
# listed once:
# - a static library, gw_${GW_FOLDER_PREFIX}NAME (or TARGET), with the folder as its public
#   include path, linking DEPENDS: the folders below it (by their targets) and outside
#   libraries. Its files see only the headers of the folders it links: an #include of a
#   folder above or beside fails the build.
# - with PROGRAM, an executable NAME instead (a folder may hold several programs, each a
#   gw_folder call of its own; set CMAKE_RUNTIME_OUTPUT_DIRECTORY for where they go).
# FACE names the folder's face: the headers the folders above may include (each must exist
# here). tools/layers.py reads these calls (FACE and DEPENDS) from the CMakeLists.txt text
# and checks the objects of the build against them. The sources are also kept (absolute
# paths) in the global property <target>_SOURCES, for the fuzz targets, which build them
# again with their own flags (tests/fuzz/).
function(gw_folder name)
  cmake_parse_arguments(F "PROGRAM" "TARGET" "SOURCES;FACE;DEPENDS" ${ARGN})
  if(F_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "gw_folder(${name}): unknown arguments ${F_UNPARSED_ARGUMENTS}")
  endif()
  foreach(h ${F_FACE})
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${h})
      message(FATAL_ERROR "gw_folder(${name}): FACE ${h} is not in ${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
  endforeach()
  if(F_PROGRAM)
    set(target ${name})
    add_executable(${target} ${F_SOURCES})
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(${target} PRIVATE ${F_DEPENDS})
  else()
    if(F_TARGET)
      set(target ${F_TARGET})
    else()
      set(target gw_${GW_FOLDER_PREFIX}${name})
    endif()
    add_library(${target} STATIC ${F_SOURCES})
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${F_DEPENDS})
  endif()
  list(TRANSFORM F_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set_property(GLOBAL PROPERTY ${target}_SOURCES ${F_SOURCES})
endfunction()
