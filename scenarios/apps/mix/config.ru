# frozen_string_literal: true

# The benchmark app: puma-plus-server -app scenarios/apps/mix/config.ru, or
# puma scenarios/apps/mix/config.ru for a side-by-side comparison.
require_relative "app"

run MixApp
