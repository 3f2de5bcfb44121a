# frozen_string_literal: true

# A classic-style Sinatra app (top-level DSL, Sinatra::Application).
require "sinatra"
require_relative "routes"

set :host_authorization, { permitted_hosts: [] } if Sinatra::VERSION >= "4.1"
SinatraRoutes.define(Sinatra::Application)

# Through the top-level delegator, as a classic app writes it.
get "/classic" do
  "classic #{request.path_info}\n"
end
run Sinatra::Application
