# expect_ir.cmake — run `moec import MODEL` and require exit 0 and exactly
# the IR in WANT (a golden file; regenerate it with moec import and review).
#
#	cmake -DMOEC=... -DMODEL=... -DWANT=... -DGOT=... -P expect_ir.cmake
execute_process(COMMAND ${MOEC} import ${MODEL} -o ${GOT} RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "moec import ${MODEL}: exit ${rc}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WANT} ${GOT} RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  execute_process(COMMAND diff -u ${WANT} ${GOT})
  message(FATAL_ERROR "${GOT} differs from ${WANT}")
endif()
