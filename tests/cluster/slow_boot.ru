# frozen_string_literal: true

# The mix app after a 2 s pause at load: its workers connect late, so the control app's
# /ready answers "503 booting" for a while (tests/cluster/test_cluster_netns.rb).
sleep 2
require_relative "../../scenarios/apps/mix/app"

run MixApp
