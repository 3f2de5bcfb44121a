# frozen_string_literal: true

# The gem's C extension: the worker's hot codec (puma_plus_ext.c). Optional at run time: if it
# is missing, lib/puma_plus/wire.rb uses its pure-Ruby codec, which is the reference.
require "mkmf"

$CFLAGS << " -Wall -Wextra -Wno-unused-parameter"
create_makefile("puma_plus/puma_plus_ext")
