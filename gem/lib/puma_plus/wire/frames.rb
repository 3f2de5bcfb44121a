# frozen_string_literal: true

module PumaPlus
  module Wire
    # One Struct per frame type of docs/PROTOCOL.md, members named as its field table.
    # `pairs` fields (REQUEST env, RESPONSE_HEAD headers) are flat Arrays
    # [key, value, key, value, ...] of Strings, order and repeated keys kept;
    # `bytes`/`rest` fields are binary Strings (body, chunk, buffered).
    Hello = Struct.new(:version, :pid, :worker_index, :thread_index, :capabilities)
    Request = Struct.new(:request_id, :t2b_ns, :t3_ns, :flags, :env, :body)
    Body = Struct.new(:request_id, :chunk)
    BodyEnd = Struct.new(:request_id)
    Cancel = Struct.new(:request_id)
    # HIJACKED: result 0 means the client's descriptor came with the frame (SCM_RIGHTS), which
    # the codec never sees; the reader that took the frame off the socket holds it.
    Hijacked = Struct.new(:request_id, :result, :buffered)
    ResponseHead = Struct.new(:request_id, :status, :headers)
    EarlyHints = Struct.new(:request_id, :headers) # a 103's fields, before ResponseHead
    ResponseBody = Struct.new(:request_id, :chunk)
    ResponseEnd = Struct.new(:request_id, :t4_ns, :t5_ns, :body_read_ns, :gvl_wait_ns, :cpu_ns)
    Hijack = Struct.new(:request_id)
    Spawn = Struct.new(:count)
    Retire = Struct.new(:pid)
    Stop = Struct.new(:grace_ms)
    Ready = Struct.new(:pid, :boot_ns)
    Forked = Struct.new(:pid, :worker_index)
    Exited = Struct.new(:pid, :status)
    # The worker's monitor connection (one per worker process, docs/PROTOCOL.md "Monitor
    # connection"): TIMEOUT and HEARTBEAT_INTERVAL come from the server, HEARTBEAT goes to it.
    Timeout = Struct.new(:request_id, :thread_index)
    # monitor_flags bit 0 (MONITOR_REQUEST_TIMEOUTS): the server may send TIMEOUT
    HeartbeatInterval = Struct.new(:interval_ms, :monitor_flags)
    Heartbeat = Struct.new(:pid, :worker_index, :heap_live_slots) # heap_live_slots: GC.stat, -1 unknown
    # A restarted shepherd learns the live workers its predecessor forked.
    Adopt = Struct.new(:pid, :worker_index)
    AdoptedExited = Struct.new(:pid, :status)
    # Standby workers (docs/CONTROL.md section 8): fork `count` parked workers; one of them
    # has booted and waits; wake parked worker `pid`.
    Standby = Struct.new(:count)
    Parked = Struct.new(:pid, :worker_index, :boot_ns)
    Activate = Struct.new(:pid)
    # Run-time concurrency (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"): the worker's target slot
    # count (monitor connection); end this idle slot (its own connection).
    Slots = Struct.new(:count)
    SlotClose = Struct.new(:thread_index)
    # WebSockets owned by the front end (docs/PROTOCOL.md "WebSocket frames", docs/WEBSOCKET.md).
    # Events (server → worker), each one queue entry finished by WS_DONE. WS_OPEN's `env` is
    # flat pairs as REQUEST's (the upgrade request's env), `tags` flat pairs ["tag", t, ...];
    # `handler` is the opaque value of the app's 101 (puma-plus-websocket-handler); `route` 0
    # sticky, 1 flexible; `handler`, `protocol`, `data`, `reason`, `tag`, `prefix`, `suffix`
    # are binary Strings.
    WsOpen = Struct.new(:event_id, :conn_id, :t_ready_ns, :t3_ns, :handler, :route, :protocol, :tags, :env)
    WsMessage = Struct.new(:event_id, :conn_id, :t_ready_ns, :t3_ns, :handler, :opcode, :data)
    WsClose = Struct.new(:event_id, :conn_id, :t_ready_ns, :t3_ns, :handler, :code, :by, :reason)
    WsDone = Struct.new(:event_id, :t4_ns, :t5_ns, :gvl_wait_ns, :cpu_ns)
    # Worker → server, at any time, never answered (a slot connection or the monitor connection).
    WsSend = Struct.new(:conn_id, :opcode, :data)
    WsTag = Struct.new(:conn_id, :op, :tag, :prefix, :suffix) # op: 0 add, 1 remove, 2 remove all
    WsBroadcast = Struct.new(:opcode, :tag, :data)
    WsCloseConn = Struct.new(:conn_id, :code, :reason)
  end
end
