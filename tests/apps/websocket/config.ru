# frozen_string_literal: true

# A Rack app on front-end-owned WebSockets (docs/RACK.md "WebSockets"): the e2e tests' and
# the negative suite's target.
#   GET /echo (upgrade)            sticky echo: text back as text, binary as binary; "pid" answers
#                                  the worker's pid; "count" how many messages this connection
#                                  sent (sticky state); "close CODE" closes with that code
#   GET /flex (upgrade)            the same echo, routed flexibly (any worker's slot)
#   GET /room?name=R (upgrade)     sticky, tagged "room:R" at accept; messages are broadcast to
#                                  the room from the event; "sub T" / "unsub T" tag / untag;
#                                  "env T" tags with an envelope ({"t":"T","m": ... })
#   POST /broadcast?room=R         body broadcast to "room:R" from a request; answers the pid
#   GET /pid                       the worker's pid
#   GET /sticky                    sticky connections this worker holds
# Anything else that asks to upgrade gets a 403 (the server sends it as it is).
require "puma_plus"

WS = PumaPlus::WebSocket

# Sticky echo; its state (a message count) lives in this worker.
class EchoHandler
  def on_open(conn)
    conn.state[:count] = 0
  end

  def on_message(conn, data)
    conn.state[:count] = conn.state.fetch(:count, 0) + 1
    return conn.send("pid #{Process.pid}") if data == "pid"
    return conn.send("count #{conn.state[:count]}") if data == "count"
    return conn.close(Integer(Regexp.last_match(1)), "asked") if data =~ /\Aclose (\d+)\z/

    conn.send(data)
  end
end

# Flexible echo: a fresh instance per event, in whichever worker is free.
class FlexHandler
  def on_message(conn, data)
    return conn.send("pid #{Process.pid}") if data == "pid"

    conn.send(data)
  end
end

class RoomHandler
  def initialize(room) = @room = room

  def on_message(conn, data)
    case data
    when /\Asub (.+)\z/ then conn.tag("room:#{Regexp.last_match(1)}")
    when /\Aunsub (.+)\z/ then conn.untag("room:#{Regexp.last_match(1)}")
    when /\Aenv (.+)\z/
      t = Regexp.last_match(1)
      conn.tag("room:#{t}", prefix: %({"t":"#{t}","m":), suffix: "}")
    when "pid" then conn.send("pid #{Process.pid}")
    else WS.broadcast("room:#{@room}", data)
    end
    conn.send("ok #{data}") if data.start_with?("sub ", "unsub ", "env ")
  end
end

run(lambda do |env|
  req = Rack::Request.new(env)
  if WS.websocket?(env)
    case req.path_info
    when "/echo" then WS.accept(env, EchoHandler, protocol: (WS.protocols(env) & ["echo"]).first)
    when "/flex" then WS.accept(env, FlexHandler, route: :flexible)
    when "/room"
      room = req.params["name"].to_s
      room = "lobby" if room.empty?
      WS.accept(env, RoomHandler.new(room), tags: ["room:#{room}"])
    else [403, { "content-type" => "text/plain" }, ["no WebSocket here\n"]]
    end
  else
    case req.path_info
    when "/broadcast"
      WS.broadcast("room:#{req.params['room']}", req.body.read)
      [200, { "content-type" => "text/plain" }, ["#{Process.pid}\n"]]
    when "/pid" then [200, { "content-type" => "text/plain" }, ["#{Process.pid}\n"]]
    when "/sticky" then [200, { "content-type" => "text/plain" }, ["#{WS.sticky_count}\n"]]
    else [404, { "content-type" => "text/plain" }, ["not found\n"]]
    end
  end
end)
