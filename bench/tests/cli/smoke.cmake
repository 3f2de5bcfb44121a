# End-to-end check of the harness: pp-bench smoke starts a real server (puma or puma-plus) in
# its own process group, waits for it, warms it up, runs 3 s of load with the sampler, stops
# it, and reports. Passes when the run's success check passed, every request got a 2xx, and
# the timeline saw the server's process tree (procs >= 2: puma master + worker; puma-plus
# server + shepherd + worker).
# Invoked as: cmake -DPPBENCH=... -DSERVER=puma|pumaplus [-DPROTO=h2|h3] -DAPP=... -P smoke.cmake
if(NOT PROTO)
  set(PROTO h1)
endif()
execute_process(
  COMMAND ${PPBENCH} smoke -server ${SERVER} -app ${APP} -path /mix/1/5 -rate 40 -dur 3s
          -w 1 -t 2 -warmup 500ms -timeline -proto ${PROTO}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 90)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pp-bench smoke -server ${SERVER} exited ${rc}: ${err}")
endif()
string(REGEX MATCH "offered ([0-9]+)  ok ([0-9]+)" m "${out}")
if(NOT m OR NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2 OR CMAKE_MATCH_1 LESS 100)
  message(FATAL_ERROR "not every request succeeded: '${m}'")
endif()
# The hypervisor's steal over the run, read from /proc/stat (a percentage, always known here).
if(NOT out MATCHES "\n  machine   steal [0-9]+\\.[0-9]% of all CPU time during the run")
  message(FATAL_ERROR "no steal line in the summary")
endif()
# A timeline row: "   1s       40       40     6.1ms     8.0ms      3  ..." (procs is column 6).
string(REGEX MATCH "\n +1s +[0-9]+ +[0-9]+ +[0-9.]+[mu]?s +[0-9.]+[mu]?s +([0-9]+) " row "${out}")
if(NOT row OR CMAKE_MATCH_1 LESS 2)
  message(FATAL_ERROR "the sampler did not see the server's process tree: '${row}'")
endif()
if(PROTO STREQUAL "h2" AND NOT out MATCHES "transport: h2, ")
  message(FATAL_ERROR "the run did not go over HTTP/2")
endif()
if(PROTO STREQUAL "h3")
  if(NOT out MATCHES "transport: h3, [1-9][0-9]* QUIC connections")
    message(FATAL_ERROR "the run did not go over HTTP/3")
  endif()
  if(out MATCHES "conn_errors by cause" OR out MATCHES "first transport error")
    message(FATAL_ERROR "transport errors over HTTP/3")
  endif()
endif()
