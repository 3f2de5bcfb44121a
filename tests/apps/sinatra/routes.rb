# frozen_string_literal: true

require "digest"

# The routes both Sinatra apps serve (tests/e2e/test_sinatra.rb), written once: the classic
# app evaluates them at the top level (Sinatra::Application), the modular one in its class.
module SinatraRoutes
  def self.define(app)
    app.instance_eval do
      set :session_secret, "puma-plus-e2e-" + ("s" * 64)
      enable :sessions

      get "/version" do
        content_type "text/plain"
        "sinatra #{Sinatra::VERSION} rack #{Rack.release} #{self.class.name}\n"
      end

      get "/hello/:name" do
        content_type "text/plain"
        "hello #{params[:name]} q=#{params[:q]} list=#{Array(params[:list]).join(',')}\n"
      end

      post "/form" do
        content_type "text/plain"
        "form a=#{params[:a]} b=#{params[:b]}\n"
      end

      get "/count" do
        session[:count] = (session[:count] || 0) + 1
        content_type "text/plain"
        "count #{session[:count]}\n"
      end

      get "/stream" do
        content_type "text/plain"
        stream do |out|
          3.times do |i|
            out << "tick #{i}\n"
            sleep 0.05
          end
        end
      end

      post "/upload" do
        file = params[:file]
        halt 400, "no file\n" unless file.is_a?(Hash) && file[:tempfile]
        data = file[:tempfile].read
        content_type "text/plain"
        "#{file[:filename]} #{data.bytesize} #{Digest::SHA256.hexdigest(data)} note=#{params[:note]}\n"
      end
    end
  end
end
