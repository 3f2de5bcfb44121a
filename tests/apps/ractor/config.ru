# frozen_string_literal: true

# A shareable app for Ractor slots (tests/e2e/test_ractors.rb, notebooks/ractors): no mutable
# state; every call builds fresh objects. /hello, and /mix/CPU_MS/IO_MS as scenarios/apps/mix
# (spin on the thread's CPU clock, then sleep). Each answer names its pid and Ractor.
require_relative "config_app"

run RactorApp.new
