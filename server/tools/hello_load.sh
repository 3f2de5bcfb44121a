# Sourced by allocs_per_request.sh and instr_per_request.sh: `load PROTOCOL N` sends N /hello
# requests with h2load (10 connections; h2 with 10 streams each) to the server under
# measurement, on $port (cleartext: h1, h2c) or $tport (TLS: h1-tls, h2-tls), and exits the
# script unless all N succeeded. h2load's output goes to $work/h2load.out.
load() { # $1 = protocol, $2 = requests
  case $1 in
    h1) h2load --h1 -n "$2" -c 10 "http://127.0.0.1:$port/hello" ;;
    h2c) h2load -n "$2" -c 10 -m 10 "http://127.0.0.1:$port/hello" ;;
    h1-tls) h2load --h1 -n "$2" -c 10 "https://127.0.0.1:$tport/hello" ;;
    h2-tls) h2load -n "$2" -c 10 -m 10 "https://127.0.0.1:$tport/hello" ;;
    *) echo "$(basename "$0"): unknown protocol $1 (h1, h2c, h1-tls, h2-tls)" >&2; exit 2 ;;
  esac > "$work/h2load.out"
  grep -q "$2 succeeded, 0 failed, 0 errored" "$work/h2load.out" || { cat "$work/h2load.out" >&2; exit 1; }
}
