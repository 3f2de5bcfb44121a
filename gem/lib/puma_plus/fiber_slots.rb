# frozen_string_literal: true

# Fiber slots (docs/RACK.md "Fiber slots"): the async gem's Fiber scheduler hosts a worker's
# slots. Loaded only with -fibers; the gem itself does not depend on async.
require "async"

# async 2.x's scheduler asks each IO it waits on for its default timeout (IO#timeout, added
# in Ruby 3.2). On Ruby 3.1 no IO has one: answer nil, which is what 3.2 answers for an IO
# whose timeout was never set, so a wait is never cut short.
unless IO.method_defined?(:timeout)
  class IO
    def timeout = nil
  end
end
