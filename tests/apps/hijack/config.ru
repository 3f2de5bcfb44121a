# frozen_string_literal: true

# The full-hijack app of tests/e2e/test_hijack.rb. Every hijacked socket is served by a
# thread of its own, so the worker thread that hijacked is free at once (Rack: the app owns
# the socket and closes it).
#
#   /echo        full hijack (env["rack.hijack"].call), then a raw byte echo until EOF
#   /hold        full hijack, the socket kept open until the client closes it
#   /ws          full hijack and a WebSocket served by websocket-driver (as Action Cable does)
#   /ws-partial  response hijack: 101 with a rack.hijack response header (hand-written RFC 6455)
#   /ws-stream   Rack 3 style: 101 and a callable (Streaming) body, same hand-written echo
#   /hijack      "rack.hijack?=VALUE rack.hijack=present|absent"
#   /late        waits 0.5 s, then tries a full hijack; /late-result says how that went
#   anything else: 200 "ok"
require "digest/sha1"
require "base64"
require "websocket/driver"

module HijackApp
  GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

  module_function

  def accept_key(env) = Base64.strict_encode64(Digest::SHA1.digest(env["HTTP_SEC_WEBSOCKET_KEY"].to_s + GUID))

  def echo(io, prefix)
    io.write(prefix) if prefix
    loop { io.write(io.readpartial(65_536)) }
  rescue EOFError, IOError, SystemCallError
    nil
  ensure
    io.close unless io.closed?
  end

  # One RFC 6455 frame from a client (masked); returns [opcode, payload] or nil at EOF.
  def read_frame(io)
    b0, b1 = io.read(2)&.bytes
    return nil unless b1

    len = b1 & 0x7f
    len = io.read(2).unpack1("n") if len == 126
    len = io.read(8).unpack1("Q>") if len == 127
    mask = (b1 & 0x80).zero? ? [0, 0, 0, 0] : io.read(4).bytes
    data = io.read(len).bytes.each_with_index.map { |b, i| b ^ mask[i % 4] }.pack("C*")
    [b0 & 0x0f, data]
  end

  def write_frame(io, opcode, data)
    data = data.b
    head = [0x80 | opcode].pack("C")
    head << (data.bytesize < 126 ? [data.bytesize].pack("C") : [126, data.bytesize].pack("Cn"))
    io.write(head + data)
  end

  # Echoes text frames as "echo: TEXT" until the client closes.
  def ws_echo(io)
    while (frame = read_frame(io))
      opcode, data = frame
      case opcode
      when 1 then write_frame(io, 1, "echo: #{data.force_encoding('UTF-8')}")
      when 9 then write_frame(io, 10, data)
      when 8
        write_frame(io, 8, data)
        break
      end
    end
  rescue IOError, SystemCallError
    nil
  ensure
    io.close unless io.closed?
  end

  def ws_headers(env)
    { "upgrade" => "websocket", "connection" => "Upgrade", "sec-websocket-accept" => accept_key(env) }
  end

  # websocket-driver over the hijacked socket, as faye-websocket / Action Cable use it.
  class DriverSocket
    attr_reader :env, :url

    def initialize(env, io)
      @env = env
      @io = io
      @url = "ws://#{env['HTTP_HOST']}#{env['REQUEST_URI']}"
    end

    def write(data) = @io.write(data)
  end

  def ws_driver(env, io)
    driver = WebSocket::Driver.rack(DriverSocket.new(env, io))
    driver.on(:message) { |e| driver.text("echo: #{e.data}") }
    driver.on(:close) { io.close unless io.closed? }
    driver.start
    driver.parse(env["puma_plus.hijack_buffered"]) if env["puma_plus.hijack_buffered"]
    loop { driver.parse(io.readpartial(65_536)) }
  rescue EOFError, IOError, SystemCallError
    nil
  ensure
    io.close unless io.closed?
  end
end

LATE = Queue.new

run(lambda do |env|
  case env["PATH_INFO"]
  when "/echo"
    io = env["rack.hijack"].call
    Thread.new { HijackApp.echo(io, env["puma_plus.hijack_buffered"]) }
    [200, {}, []] # ignored by the server after a full hijack
  when "/hold"
    io = env["rack.hijack"].call
    io.write("held\n")
    Thread.new { HijackApp.echo(io, nil) }
    [200, {}, []]
  when "/ws"
    io = env["rack.hijack"].call
    Thread.new { HijackApp.ws_driver(env, io) }
    [200, {}, []]
  when "/ws-partial"
    [101, HijackApp.ws_headers(env).merge("rack.hijack" => ->(io) { Thread.new { HijackApp.ws_echo(io) } }), []]
  when "/ws-stream"
    [101, HijackApp.ws_headers(env), ->(stream) { Thread.new { HijackApp.ws_echo(stream) } }]
  when "/late"
    sleep 0.5
    begin
      env["rack.hijack"].call.close
      LATE << "hijacked"
    rescue IOError => e
      LATE << e.message
    end
    [200, {}, ["late"]]
  when "/late-result"
    [200, { "content-type" => "text/plain" }, [LATE.pop]]
  when "/hijack"
    body = "rack.hijack?=#{env['rack.hijack?'].inspect} rack.hijack=#{env.key?('rack.hijack') ? 'present' : 'absent'}"
    [200, { "content-type" => "text/plain" }, [body]]
  else
    [200, { "content-type" => "text/plain" }, ["ok"]]
  end
end)
