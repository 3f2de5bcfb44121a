# End-to-end check of `pp-bench soak -short` (bench/soak/soak.c): it starts the server, runs three
# cycles of steady, overload, body, cancel and recovery traffic, and must report 0 failures in
# steady and recovery phases and flat descriptors.
#   -DSERVER=pumaplus: puma-plus with shedding on; the soak must PASS.
#   -DSERVER=null: the null server as a child process, twice, shortened: without a leak the
#     soak must PASS; with -leak-every 50 (one descriptor leaked every 50 requests) it must FAIL
#     on descriptors alone (exit 1, "NOT FLAT", still 0 failures) -- the check can fail.
# Invoked as: cmake -DPPBENCH=... -DSERVER=pumaplus|null -DLOGDIR=... [-DPROTO=h2] -P soak.cmake
if(NOT PROTO)
  set(PROTO h1)
endif()
file(MAKE_DIRECTORY ${LOGDIR})

function(soak expect_rc)
  execute_process(
    COMMAND ${PPBENCH} soak -short -no-db -log-dir ${LOGDIR} ${ARGN}
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 110)
  message(STATUS "pp-bench soak -short ${ARGN}:\n${out}")
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "pp-bench soak ${ARGN} exited ${rc}, expected ${expect_rc}:\n${err}")
  endif()
  if(NOT out MATCHES "failures in steady\\+recovery 0;")
    message(FATAL_ERROR "steady/recovery failures (or no total line)")
  endif()
  # Every phase row ends with the hypervisor's steal over it (a percentage; "unknown" only
  # where /proc/stat cannot be read, which it can on the machines that run this).
  if(NOT out MATCHES "heap slots +steal\n")
    message(FATAL_ERROR "the phase table has no steal column")
  endif()
  string(REGEX MATCHALL "\n[0-9]+ +(steady|overload|body|cancel|recovery) [^\n]* [0-9]+\\.[0-9]%" srows "${out}")
  string(REGEX MATCHALL "\n[0-9]+ +(steady|overload|body|cancel|recovery) " allrows "${out}")
  list(LENGTH srows ns)
  list(LENGTH allrows na)
  if(na EQUAL 0 OR NOT ns EQUAL na)
    message(FATAL_ERROR "${ns} of ${na} phase rows end with a steal percentage")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

if(SERVER STREQUAL "pumaplus")
  soak(0 -shed -proto ${PROTO})
  if(NOT out MATCHES "\\(tolerance \\+-[0-9]+\\): flat\n" OR NOT out MATCHES "verdict: PASS")
    message(FATAL_ERROR "descriptors not flat or no PASS verdict")
  endif()
  # Three cycles ran, each with all five phases.
  string(REGEX MATCHALL "\n3 +(steady|overload|body|cancel|recovery) " rows "${out}")
  list(LENGTH rows n)
  if(NOT n EQUAL 5)
    message(FATAL_ERROR "cycle 3 has ${n} phase rows, expected 5")
  endif()
elseif(SERVER STREQUAL "null")
  set(fast -steady 1s -overload 1s -cancel 1s -recovery 1s -recovery-gap 0 -settle 2s -server null)
  soak(0 ${fast})
  if(NOT out MATCHES "verdict: PASS")
    message(FATAL_ERROR "the null server without a leak did not pass")
  endif()
  soak(1 ${fast} -leak-every 50)
  if(NOT out MATCHES "NOT FLAT" OR NOT out MATCHES "verdict: FAIL \\(descriptors not flat\\)")
    message(FATAL_ERROR "an injected descriptor leak was not reported as not flat")
  endif()
else()
  message(FATAL_ERROR "SERVER must be pumaplus or null")
endif()
