# frozen_string_literal: true

# A modular Sinatra app (a Sinatra::Base subclass).
require "sinatra/base"
require_relative "routes"

class ModularApp < Sinatra::Base
  set :host_authorization, { permitted_hosts: [] } if Sinatra::VERSION >= "4.1"
  SinatraRoutes.define(self)
end

run ModularApp
