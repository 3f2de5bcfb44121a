# Sourced by instr_per_request.sh and ruby_instr_per_request.sh: the baseline check of
# PP_INSTR_CHECK=FILE (lines "key instructions", # comments).
#   instr_check TOOL KEY MARGINAL FILE
# prints and returns 0 when MARGINAL is within 20% of KEY's line in FILE; says why on stderr
# and returns 1 when it grew more, or when FILE has no line for KEY.
instr_check() {
  local tool=$1 key=$2 marginal=$3 file=$4 base
  base=$(awk -v k="$key" '$1==k {print $2}' "$file")
  if [[ -z $base ]]; then
    echo "$tool: no baseline for $key in $file" >&2
    return 1
  elif (( marginal * 100 > base * 120 )); then
    echo "$tool: $key: $marginal instructions per request, more than 20% over the baseline $base" >&2
    return 1
  fi
  echo "$tool: $key: $marginal within 20% of the baseline $base"
}
