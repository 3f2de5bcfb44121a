# frozen_string_literal: true

# The Ruby codec of the puma-plus wire protocol (docs/PROTOCOL.md, normative).
#
# Sans-I/O: bytes in, frame Structs out, and back. `Wire.decode` takes a buffer and an offset
# and returns [frame, bytes consumed], or nil when the buffer holds only part of a frame
# ("need more"); a malformed frame raises Wire::ProtocolError and nothing else. Encoders
# return binary Strings ready to write. The worker's hot path uses the `encode_response_*`
# helpers and `decode_payload` directly; the generic `encode` exists for tests and tools.
#
# Frame: 8-byte header (u8 type | u24 reserved = 0 | u32 length, big-endian), then `length`
# bytes of payload (at most MAX_PAYLOAD), whose fields must fill it exactly.

require_relative "response" # append_response_headers flattens with Response.flatten_headers
require_relative "wire/protocol_error"
require_relative "wire/frames"
require_relative "wire/decoder"

module PumaPlus
  module Wire
    VERSION = 1
    HEADER_SIZE = 8
    MAX_PAYLOAD = 4 * 1024 * 1024

    HELLO = 0x01
    REQUEST = 0x10
    BODY = 0x11
    BODY_END = 0x12
    CANCEL = 0x13
    HIJACKED = 0x15
    TIMEOUT = 0x16
    HEARTBEAT_INTERVAL = 0x17
    SLOTS = 0x18
    SLOT_CLOSE = 0x19
    RESPONSE_HEAD = 0x20
    RESPONSE_BODY = 0x21
    RESPONSE_END = 0x22
    HIJACK = 0x23
    HEARTBEAT = 0x24
    EARLY_HINTS = 0x26
    SPAWN = 0x30
    RETIRE = 0x31
    STOP = 0x32
    READY = 0x33
    FORKED = 0x34
    EXITED = 0x35
    ADOPT = 0x39
    ADOPTED_EXITED = 0x3A
    STANDBY = 0x36
    PARKED = 0x37
    ACTIVATE = 0x38
    WS_OPEN = 0x40
    WS_MESSAGE = 0x41
    WS_CLOSE = 0x42
    WS_DONE = 0x43
    WS_SEND = 0x44
    WS_TAG = 0x45
    WS_BROADCAST = 0x46
    WS_CLOSE_CONN = 0x47

    # HELLO capability bits and REQUEST flag bits.
    CAP_GVL_WAIT = 1
    CAP_CPU_TIME = 2
    CAP_RACTOR = 4 # the slot is a Ractor (its own GVL), not a thread or fiber
    FLAG_BODY_STREAMS = 1
    FLAG_HIJACKABLE = 2
    FLAG_EARLY_HINTS = 4
    # The body is in a spooled file whose descriptor came with the frame (SCM_RIGHTS).
    FLAG_BODY_FILE = 16
    # HEARTBEAT_INTERVAL monitor_flags: the server may send TIMEOUT (-request-timeout is set).
    MONITOR_REQUEST_TIMEOUTS = 1

    # HIJACKED results.
    HIJACK_OK = 0
    HIJACK_GONE = 1
    HIJACK_REFUSED = 2

    # WebSocket message opcodes (RFC 6455), WS_TAG ops, WS_CLOSE `by`.
    WS_TEXT = 1
    WS_BINARY = 2
    WS_TAG_ADD = 0
    WS_TAG_REMOVE = 1
    WS_TAG_REMOVE_ALL = 2
    WS_BY_PEER = 0
    WS_BY_SERVER = 1
    WS_BY_TRANSPORT = 2

    # Frame type byte → [name, Struct class]. Deeply frozen (Ractor.make_shareable), as FIXED
    # is: a constant a non-main Ractor reads must be shareable (docs/RACK.md "Ractor slots").
    TYPES = Ractor.make_shareable({
      HELLO => ["HELLO", Hello], REQUEST => ["REQUEST", Request], BODY => ["BODY", Body],
      BODY_END => ["BODY_END", BodyEnd], CANCEL => ["CANCEL", Cancel],
      HIJACKED => ["HIJACKED", Hijacked], HIJACK => ["HIJACK", Hijack],
      RESPONSE_HEAD => ["RESPONSE_HEAD", ResponseHead],
      RESPONSE_BODY => ["RESPONSE_BODY", ResponseBody],
      RESPONSE_END => ["RESPONSE_END", ResponseEnd], SPAWN => ["SPAWN", Spawn],
      RETIRE => ["RETIRE", Retire], STOP => ["STOP", Stop], READY => ["READY", Ready],
      FORKED => ["FORKED", Forked], EXITED => ["EXITED", Exited],
      TIMEOUT => ["TIMEOUT", Timeout], HEARTBEAT_INTERVAL => ["HEARTBEAT_INTERVAL", HeartbeatInterval],
      HEARTBEAT => ["HEARTBEAT", Heartbeat], ADOPT => ["ADOPT", Adopt],
      ADOPTED_EXITED => ["ADOPTED_EXITED", AdoptedExited],
      STANDBY => ["STANDBY", Standby], PARKED => ["PARKED", Parked], ACTIVATE => ["ACTIVATE", Activate],
      SLOTS => ["SLOTS", Slots], SLOT_CLOSE => ["SLOT_CLOSE", SlotClose],
      EARLY_HINTS => ["EARLY_HINTS", EarlyHints],
      WS_OPEN => ["WS_OPEN", WsOpen], WS_MESSAGE => ["WS_MESSAGE", WsMessage],
      WS_CLOSE => ["WS_CLOSE", WsClose], WS_DONE => ["WS_DONE", WsDone], WS_SEND => ["WS_SEND", WsSend],
      WS_TAG => ["WS_TAG", WsTag], WS_BROADCAST => ["WS_BROADCAST", WsBroadcast],
      WS_CLOSE_CONN => ["WS_CLOSE_CONN", WsCloseConn]
    })
    TYPE_OF_CLASS = TYPES.to_h { |type, (_, klass)| [klass, type] }.freeze

    # Fixed-size frames: type → [payload size, unpack template].
    FIXED = Ractor.make_shareable({
      HELLO => [18, "nNNNN"], BODY_END => [8, "Q>"], CANCEL => [8, "Q>"], HIJACK => [8, "Q>"],
      RESPONSE_END => [48, "Q>Q>Q>Q>q>q>"], SPAWN => [4, "N"], RETIRE => [4, "N"],
      STOP => [4, "N"], READY => [12, "NQ>"], FORKED => [8, "NN"], EXITED => [8, "Nl>"],
      TIMEOUT => [12, "Q>N"], HEARTBEAT_INTERVAL => [8, "NN"], HEARTBEAT => [16, "NNq>"],
      ADOPT => [8, "NN"], ADOPTED_EXITED => [8, "Nl>"],
      STANDBY => [4, "N"], PARKED => [16, "NNQ>"], ACTIVATE => [4, "N"],
      SLOTS => [4, "N"], SLOT_CLOSE => [4, "N"], WS_DONE => [40, "Q>Q>Q>q>q>"]
    })

    BINARY = Encoding::BINARY
    UTF_8 = Encoding::UTF_8
    # The body of a decoded REQUEST that has none (most): one frozen String, not one per request.
    EMPTY_BODY = "".b.freeze

    module_function

    # Decodes one frame from `buf` at byte offset `pos`. Returns [frame, consumed] or nil if
    # the frame is not complete yet. Raises ProtocolError for a malformed frame, as soon as the
    # header shows it (bad reserved bytes, unknown type, length over MAX_PAYLOAD).
    # With `env_proto` (a Hash), a REQUEST's env comes as decode_request_env makes it.
    def decode(buf, pos = 0, env_proto = nil)
      avail = buf.bytesize - pos
      return nil if avail < HEADER_SIZE

      type, length = check_header(buf, pos)
      return nil if avail < HEADER_SIZE + length

      payload = buf.byteslice(pos + HEADER_SIZE, length)
      [decode_payload(type, payload, env_proto), HEADER_SIZE + length]
    end

    # The PROTOCOL.md name of a frame Struct ("REQUEST", "BODY_END", ...).
    def frame_name(frame) = TYPES.fetch(TYPE_OF_CLASS.fetch(frame.class))[0]

    # Validates the 8-byte header at `pos`; returns [type, length] or raises.
    def check_header(buf, pos = 0)
      word, length = buf.unpack("NN", offset: pos)
      type = word >> 24
      raise ProtocolError.new(:reserved, format("reserved header bytes 0x%06x are not zero", word & 0xffffff)) if word & 0xffffff != 0
      raise ProtocolError.new(:unknown_type, format("unknown frame type 0x%02x", type)) unless TYPES.key?(type)
      raise ProtocolError.new(:too_large, "payload length #{length} over the maximum #{MAX_PAYLOAD}") if length > MAX_PAYLOAD

      [type, length]
    end

    # Decodes a complete payload of frame `type` (a binary String of exactly the payload).
    # With `env_proto`, a REQUEST is decoded by decode_request_env.
    def decode_payload(type, payload, env_proto = nil)
      fixed = FIXED[type]
      if fixed
        size, template = fixed
        mismatch(type, payload.bytesize, "exactly #{size}") if payload.bytesize != size
        return TYPES[type][1].new(*payload.unpack(template))
      end
      case type
      when REQUEST then env_proto ? decode_request_env(payload, env_proto) : decode_request(payload)
      when RESPONSE_HEAD then decode_response_head(payload)
      when EARLY_HINTS then decode_early_hints(payload)
      when BODY then Body.new(*decode_chunk(type, payload))
      when RESPONSE_BODY then ResponseBody.new(*decode_chunk(type, payload))
      when HIJACKED then decode_hijacked(payload)
      when WS_OPEN then decode_ws_open(payload)
      when WS_MESSAGE then decode_ws_message(payload)
      when WS_CLOSE then decode_ws_close(payload)
      when WS_SEND then decode_ws_send(payload)
      when WS_TAG then decode_ws_tag(payload)
      when WS_BROADCAST then decode_ws_broadcast(payload)
      when WS_CLOSE_CONN then decode_ws_close_conn(payload)
      end
    end

    # ---- WebSocket frames (docs/PROTOCOL.md "WebSocket frames") -----------------------------
    # The events' common head: u64 event_id, u64 conn_id, u64 t_ready_ns, u64 t3_ns (32 bytes).

    # WS_OPEN: head, bytes handler, u8 route, bytes protocol, pairs tags, pairs env.
    def decode_ws_open(payload)
      len = payload.bytesize
      mismatch(WS_OPEN, len, "at least 49") if len < 49
      event_id, conn_id, t_ready, t3, n = payload.unpack("Q>Q>Q>Q>N")
      mismatch(WS_OPEN, len, "#{n} handler bytes at 36") if n > len - 36
      handler = payload.byteslice(36, n)
      pos = 36 + n
      mismatch(WS_OPEN, len, "room for a route and a protocol length at #{pos}") if pos + 5 > len
      route, n = payload.unpack("CN", offset: pos)
      pos += 5
      mismatch(WS_OPEN, len, "#{n} protocol bytes at #{pos}") if n > len - pos
      protocol = payload.byteslice(pos, n)
      tags, pos = decode_pairs(WS_OPEN, payload, pos + n)
      env, pos = decode_pairs(WS_OPEN, payload, pos)
      mismatch(WS_OPEN, len, "#{pos} (trailing bytes)") if pos != len
      WsOpen.new(event_id, conn_id, t_ready, t3, handler, route, protocol, tags, env)
    end

    # The events' head and handler: [event_id, conn_id, t_ready_ns, t3_ns, handler, next_pos];
    # `need` is how many bytes must follow the handler.
    def decode_ws_event_head(type, payload, need)
      len = payload.bytesize
      mismatch(type, len, "at least #{36 + need}") if len < 36 + need
      event_id, conn_id, t_ready, t3, n = payload.unpack("Q>Q>Q>Q>N")
      mismatch(type, len, "#{n} handler bytes and #{need} more at 36") if n > len - 36 - need
      [event_id, conn_id, t_ready, t3, payload.byteslice(36, n), 36 + n]
    end

    # WS_MESSAGE: head, bytes handler, u8 opcode, rest data.
    def decode_ws_message(payload)
      len = payload.bytesize
      event_id, conn_id, t_ready, t3, handler, pos = decode_ws_event_head(WS_MESSAGE, payload, 1)
      WsMessage.new(event_id, conn_id, t_ready, t3, handler, payload.getbyte(pos),
                    payload.byteslice(pos + 1, len - pos - 1))
    end

    # WS_CLOSE: head, bytes handler, u16 code, u8 by, rest reason.
    def decode_ws_close(payload)
      len = payload.bytesize
      event_id, conn_id, t_ready, t3, handler, pos = decode_ws_event_head(WS_CLOSE, payload, 3)
      code, by = payload.unpack("nC", offset: pos)
      WsClose.new(event_id, conn_id, t_ready, t3, handler, code, by, payload.byteslice(pos + 3, len - pos - 3))
    end

    def decode_ws_send(payload)
      len = payload.bytesize
      mismatch(WS_SEND, len, "at least 9") if len < 9
      conn_id, opcode = payload.unpack("Q>C")
      WsSend.new(conn_id, opcode, payload.byteslice(9, len - 9))
    end

    def decode_ws_tag(payload)
      len = payload.bytesize
      mismatch(WS_TAG, len, "at least 21") if len < 21
      conn_id, op = payload.unpack("Q>C")
      pos = 9
      parts = Array.new(3) do |i|
        mismatch(WS_TAG, len, "room for a bytes length at #{pos}") if pos + 4 > len
        n = payload.unpack1("N", offset: pos)
        pos += 4
        mismatch(WS_TAG, len, "#{n} #{%w[tag prefix suffix][i]} bytes at #{pos}") if n > len - pos
        pos += n
        payload.byteslice(pos - n, n)
      end
      mismatch(WS_TAG, len, "#{pos} (trailing bytes)") if pos != len
      WsTag.new(conn_id, op, *parts)
    end

    # WS_BROADCAST: u8 opcode, bytes tag, rest data.
    def decode_ws_broadcast(payload)
      len = payload.bytesize
      mismatch(WS_BROADCAST, len, "at least 5") if len < 5
      opcode, n = payload.unpack("CN")
      mismatch(WS_BROADCAST, len, "#{n} tag bytes at 5") if n > len - 5
      WsBroadcast.new(opcode, payload.byteslice(5, n), payload.byteslice(5 + n, len - 5 - n))
    end

    def decode_ws_close_conn(payload)
      len = payload.bytesize
      mismatch(WS_CLOSE_CONN, len, "at least 10") if len < 10
      conn_id, code = payload.unpack("Q>n")
      WsCloseConn.new(conn_id, code, payload.byteslice(10, len - 10))
    end

    def decode_request(payload)
      len = payload.bytesize
      mismatch(REQUEST, len, "at least 33") if len < 33
      id, t2b, t3, flags = payload.unpack("Q>Q>Q>C")
      env, pos = decode_pairs(REQUEST, payload, 25)
      mismatch(REQUEST, len, "room for the body length at #{pos}") if pos + 4 > len
      n = payload.unpack1("N", offset: pos)
      pos += 4
      mismatch(REQUEST, len, "#{pos + n} (body of #{n} bytes at #{pos})") if n != len - pos
      Request.new(id, t2b, t3, flags, env, n.zero? ? EMPTY_BODY : payload.byteslice(pos, n))
    end

    # A REQUEST whose env is the Rack env itself: a dup of `proto` (the worker's frozen
    # prototype env, a Hash) with the pairs stored in order, so a repeated key keeps its last
    # value. The worker's hot path; the C codec builds the Hash without the flat Array.
    def decode_request_env(payload, proto)
      req = decode_request(payload)
      env = proto.dup
      pairs = req.env
      i = 0
      n = pairs.size
      while i < n
        env[pairs[i]] = pairs[i + 1]
        i += 2
      end
      req.env = env
      req
    end

    # The REQUEST frame at byte `pos` of `buf`, decoded as decode_request_env does; nil when
    # `buf` holds less than the whole frame; false when the header there is not a
    # well-formed REQUEST's (another type, reserved bytes set, length over MAX_PAYLOAD), which
    # the generic `decode` then takes (and rejects where it must). The frame's size is
    # HEADER_SIZE + its length field. The Decoder's hot path: the C codec reads the frame in
    # place, with no payload String, header Array or [frame, consumed] pair. `key_cache` is
    # an Array kept per connection for the C codec (the env keys by pair index, so a key seen
    # before is not interned again); this reference leaves it alone.
    def decode_request_at(buf, pos, proto, _key_cache)
      avail = buf.bytesize - pos
      return nil if avail < HEADER_SIZE

      word, length = buf.unpack("NN", offset: pos)
      return false if word != REQUEST << 24 || length > MAX_PAYLOAD
      return nil if avail < HEADER_SIZE + length

      decode_request_env(buf.byteslice(pos + HEADER_SIZE, length), proto)
    end

    def decode_response_head(payload)
      len = payload.bytesize
      mismatch(RESPONSE_HEAD, len, "at least 14") if len < 14
      id, status = payload.unpack("Q>n")
      headers, pos = decode_pairs(RESPONSE_HEAD, payload, 10)
      mismatch(RESPONSE_HEAD, len, "#{pos} (trailing bytes)") if pos != len
      ResponseHead.new(id, status, headers)
    end

    def decode_early_hints(payload)
      len = payload.bytesize
      mismatch(EARLY_HINTS, len, "at least 12") if len < 12
      id = payload.unpack1("Q>")
      headers, pos = decode_pairs(EARLY_HINTS, payload, 8)
      mismatch(EARLY_HINTS, len, "#{pos} (trailing bytes)") if pos != len
      EarlyHints.new(id, headers)
    end

    def decode_hijacked(payload)
      mismatch(HIJACKED, payload.bytesize, "at least 9") if payload.bytesize < 9
      id, result = payload.unpack("Q>C")
      Hijacked.new(id, result, payload.byteslice(9, payload.bytesize - 9))
    end

    def decode_chunk(type, payload)
      mismatch(type, payload.bytesize, "at least 8") if payload.bytesize < 8
      [payload.unpack1("Q>"), payload.byteslice(8, payload.bytesize - 8)]
    end

    # Reads `pairs` at `pos`; returns [[key, value, key, value, ...], next_pos]. Keys are
    # interned frozen UTF-8 Strings (Hash#[]= then stores them without copying); values are
    # binary Strings. Hot path: one REQUEST carries ~15 pairs, so this loop is inlined.
    def decode_pairs(type, payload, pos)
      len = payload.bytesize
      mismatch(type, len, "room for a pairs count at #{pos}") if pos + 4 > len
      count = payload.unpack1("N", offset: pos)
      pos += 4
      # Each pair takes at least 8 bytes: reject absurd counts before looping.
      mismatch(type, len, "room for #{count} pairs") if count * 8 > len - pos
      flat = Array.new(count * 2)
      i = 0
      last = count * 2
      while i < last
        mismatch(type, len, "room for a key length at #{pos}") if pos + 4 > len
        n = payload.unpack1("N", offset: pos)
        pos += 4
        mismatch(type, len, "#{n} key bytes at #{pos}") if n > len - pos
        key = payload.byteslice(pos, n)
        key.force_encoding(UTF_8)
        flat[i] = -key
        pos += n
        mismatch(type, len, "room for a value length at #{pos}") if pos + 4 > len
        n = payload.unpack1("N", offset: pos)
        pos += 4
        mismatch(type, len, "#{n} value bytes at #{pos}") if n > len - pos
        flat[i + 1] = payload.byteslice(pos, n)
        pos += n
        i += 2
      end
      [flat, pos]
    end

    def mismatch(type, length, need)
      raise ProtocolError.new(:length_mismatch, "#{TYPES[type][0]} payload of #{length} bytes, fields need #{need}")
    end

    # ---- encoders ------------------------------------------------------------------------

    def header(type, length)
      [type << 24, length].pack("NN")
    end

    # Generic encoder for any frame Struct (tests, tools, the shepherd's rare frames).
    def encode(frame)
      type = TYPE_OF_CLASS.fetch(frame.class) { raise ArgumentError, "not a wire frame: #{frame.class}" }
      payload =
        case frame
        when Hello, BodyEnd, Cancel, Hijack, ResponseEnd, Spawn, Retire, Stop, Ready, Forked, Exited,
             Timeout, HeartbeatInterval, Heartbeat, Adopt, AdoptedExited,
             Standby, Parked, Activate, Slots, SlotClose, WsDone
          frame.to_a.pack(FIXED[type][1])
        when Request
          buf = [frame.request_id, frame.t2b_ns, frame.t3_ns, frame.flags].pack("Q>Q>Q>C")
          append_pairs(buf, frame.env)
          append_bytes(buf, frame.body)
        when ResponseHead
          append_pairs([frame.request_id, frame.status].pack("Q>n"), frame.headers)
        when EarlyHints
          append_pairs([frame.request_id].pack("Q>"), frame.headers)
        when Body, ResponseBody
          [frame.request_id].pack("Q>") << bin(frame.chunk)
        when Hijacked
          [frame.request_id, frame.result].pack("Q>C") << bin(frame.buffered)
        when WsOpen
          buf = append_bytes([frame.event_id, frame.conn_id, frame.t_ready_ns, frame.t3_ns].pack("Q>Q>Q>Q>"), frame.handler)
          buf << [frame.route].pack("C")
          append_bytes(buf, frame.protocol)
          append_pairs(buf, frame.tags)
          append_pairs(buf, frame.env)
        when WsMessage
          append_bytes([frame.event_id, frame.conn_id, frame.t_ready_ns, frame.t3_ns].pack("Q>Q>Q>Q>"), frame.handler) <<
            [frame.opcode].pack("C") << bin(frame.data)
        when WsClose
          append_bytes([frame.event_id, frame.conn_id, frame.t_ready_ns, frame.t3_ns].pack("Q>Q>Q>Q>"), frame.handler) <<
            [frame.code, frame.by].pack("nC") << bin(frame.reason)
        when WsSend then return append_ws_send(+"".b, frame.conn_id, frame.opcode, frame.data)
        when WsTag then return append_ws_tag(+"".b, frame.conn_id, frame.op, frame.tag, frame.prefix, frame.suffix)
        when WsBroadcast then return append_ws_broadcast(+"".b, frame.opcode, frame.tag, frame.data)
        when WsCloseConn then return append_ws_close_conn(+"".b, frame.conn_id, frame.code, frame.reason)
        end
      raise ArgumentError, "payload of #{payload.bytesize} bytes over #{MAX_PAYLOAD}" if payload.bytesize > MAX_PAYLOAD

      header(type, payload.bytesize) << payload
    end

    def append_bytes(buf, str)
      buf << [str.bytesize].pack("N") << bin(str)
    end

    # `str` as something a binary buffer can take with <<: a String with non-ASCII bytes in
    # another encoding is copied as binary; others (the common case) are used as they are.
    def bin(str)
      str.encoding == BINARY || str.ascii_only? ? str : str.b
    end

    def append_pairs(buf, flat)
      raise ArgumentError, "pairs need an even number of strings, got #{flat.size}" if flat.size.odd?

      buf << [flat.size / 2].pack("N")
      flat.each { |s| append_bytes(buf, s) }
      buf
    end

    # ---- hot-path encoders (worker) -------------------------------------------------------

    def encode_hello(pid, worker_index, thread_index, capabilities)
      header(HELLO, 18) << [VERSION, pid, worker_index, thread_index, capabilities].pack("nNNNN")
    end

    # HIJACK: the worker asks for the client's socket (REQUEST flag FLAG_HIJACKABLE only).
    def encode_hijack(request_id)
      [HIJACK << 24, 8, request_id].pack("NNQ>")
    end

    # Appends a RESPONSE_HEAD to `out`. `flat` is [key, value, key, value, ...] of Strings.
    def append_response_head(out, request_id, status, flat)
      start = out.bytesize
      out << "\0\0\0\0\0\0\0\0".b << [request_id, status, flat.size / 2].pack("Q>nN")
      flat.each { |s| out << [s.bytesize].pack("N") << bin(s) }
      length = out.bytesize - start - HEADER_SIZE
      raise ArgumentError, "response head of #{length} bytes over #{MAX_PAYLOAD}" if length > MAX_PAYLOAD

      out[start, HEADER_SIZE] = header(RESPONSE_HEAD, length)
      out
    end

    # Appends an EARLY_HINTS (a 103's fields; REQUEST flag FLAG_EARLY_HINTS only) to `out`.
    # `flat` is [key, value, key, value, ...] of Strings.
    def append_early_hints(out, request_id, flat)
      start = out.bytesize
      out << "\0\0\0\0\0\0\0\0".b << [request_id, flat.size / 2].pack("Q>N")
      flat.each { |s| out << [s.bytesize].pack("N") << bin(s) }
      length = out.bytesize - start - HEADER_SIZE
      raise ArgumentError, "early hints of #{length} bytes over #{MAX_PAYLOAD}" if length > MAX_PAYLOAD

      out[start, HEADER_SIZE] = header(EARLY_HINTS, length)
      out
    end

    # Appends a RESPONSE_HEAD to `out` from a Rack response's headers, flattened as
    # Response.flatten_headers does (the C codec writes them without the flat Array).
    def append_response_headers(out, request_id, status, headers)
      append_response_head(out, request_id, status, Response.flatten_headers(headers))
    end

    # Appends RESPONSE_BODY frames carrying `chunk` (split at MAX_PAYLOAD) to `out`.
    def append_response_body(out, request_id, chunk)
      chunk = bin(chunk)
      size = chunk.bytesize
      if size <= MAX_PAYLOAD - 8
        return out << [RESPONSE_BODY << 24, size + 8, request_id].pack("NNQ>") << chunk
      end

      off = 0
      while off < size
        part = chunk.byteslice(off, MAX_PAYLOAD - 8)
        out << [RESPONSE_BODY << 24, part.bytesize + 8, request_id].pack("NNQ>") << part
        off += part.bytesize
      end
      out
    end

    def append_response_end(out, request_id, t4, t5, body_read_ns, gvl_wait_ns, cpu_ns)
      out << [RESPONSE_END << 24, 48, request_id, t4, t5, body_read_ns, gvl_wait_ns, cpu_ns].pack("NNQ>Q>Q>Q>q>q>")
    end

    # ---- WebSocket encoders (worker → server; docs/PROTOCOL.md "WebSocket frames") -----------
    # Each appends one frame to `out` and returns it; a frame over MAX_PAYLOAD raises
    # ArgumentError (nothing appended).

    def append_ws_done(out, event_id, t4, t5, gvl_wait_ns, cpu_ns)
      out << [WS_DONE << 24, 40, event_id, t4, t5, gvl_wait_ns, cpu_ns].pack("NNQ>Q>Q>q>q>")
    end

    def append_ws_send(out, conn_id, opcode, data)
      data = bin(data)
      check_ws_size(WS_SEND, 9 + data.bytesize)
      out << [WS_SEND << 24, 9 + data.bytesize, conn_id, opcode].pack("NNQ>C") << data
    end

    def append_ws_tag(out, conn_id, op, tag, prefix, suffix)
      tag = bin(tag)
      prefix = bin(prefix)
      suffix = bin(suffix)
      length = 21 + tag.bytesize + prefix.bytesize + suffix.bytesize
      check_ws_size(WS_TAG, length)
      out << [WS_TAG << 24, length, conn_id, op, tag.bytesize].pack("NNQ>CN") << tag <<
        [prefix.bytesize].pack("N") << prefix << [suffix.bytesize].pack("N") << suffix
    end

    def append_ws_broadcast(out, opcode, tag, data)
      tag = bin(tag)
      data = bin(data)
      length = 5 + tag.bytesize + data.bytesize
      check_ws_size(WS_BROADCAST, length)
      out << [WS_BROADCAST << 24, length, opcode, tag.bytesize].pack("NNCN") << tag << data
    end

    def append_ws_close_conn(out, conn_id, code, reason)
      reason = bin(reason)
      check_ws_size(WS_CLOSE_CONN, 10 + reason.bytesize)
      out << [WS_CLOSE_CONN << 24, 10 + reason.bytesize, conn_id, code].pack("NNQ>n") << reason
    end

    def check_ws_size(type, length)
      raise ArgumentError, "#{TYPES[type][0]} payload of #{length} bytes over #{MAX_PAYLOAD}" if length > MAX_PAYLOAD
    end

    # ---- codec selection ------------------------------------------------------------------
    # The hot functions exist twice: the Ruby ones above (the reference, kept as ruby_NAME)
    # and, when the gem's C extension is built (ext/puma_plus), native_NAME. Wire.codec=
    # points NAME at one set; the worker uses :native when it is there.
    HOT = %i[decode_request decode_request_env decode_request_at append_response_head
             append_response_headers append_response_body append_response_end
             append_early_hints decode_ws_message append_ws_done append_ws_send
             append_ws_broadcast].freeze
    HOT.each { |m| singleton_class.send(:alias_method, :"ruby_#{m}", m) }

    def self.native_available? = respond_to?(:native_decode_request)

    def self.codec = @codec

    def self.codec=(name)
      raise ArgumentError, "codec #{name.inspect}: :ruby or :native" unless %i[ruby native].include?(name)
      raise LoadError, "the native codec (ext/puma_plus) is not built" if name == :native && !native_available?

      HOT.each { |m| singleton_class.send(:alias_method, m, :"#{name}_#{m}") }
      @codec = name
    end
  end
end

begin
  require "puma_plus/puma_plus_ext" unless ENV["PUMA_PLUS_PURE_RUBY"]
rescue LoadError
  nil # the pure-Ruby codec serves
end
PumaPlus::Wire.codec = PumaPlus::Wire.native_available? ? :native : :ruby
