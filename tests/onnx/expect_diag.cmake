# expect_diag.cmake — run `moec import MODEL` and require exit code 2 and
# every "# EXPECT: text" line of EXPECT_FILE in its diagnostics.
#
#	cmake -DMOEC=... -DMODEL=... -DEXPECT_FILE=... -P expect_diag.cmake
execute_process(COMMAND ${MOEC} import ${MODEL} RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "moec import ${MODEL}: exit ${rc}, expected 2\n${err}")
endif()
file(STRINGS ${EXPECT_FILE} lines REGEX "^# EXPECT: ")
if(NOT lines)
  message(FATAL_ERROR "${EXPECT_FILE} has no # EXPECT: line")
endif()
foreach(line IN LISTS lines)
  string(REPLACE "# EXPECT: " "" want "${line}")
  string(FIND "${err}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "missing from the diagnostics: ${want}\n--- got:\n${err}")
  endif()
endforeach()
