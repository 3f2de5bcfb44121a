/* The WebSocket opening handshake's checks (server/proto/ws.h): an HTTP/1.1 Upgrade request
 * (RFC 6455 §4.2.1) or an extended CONNECT over HTTP/2 or HTTP/3 (RFC 8441 §4-5, RFC 9220
 * §3), Sec-WebSocket-Accept (SHA-1 from OpenSSL, base64), and the permessage-deflate
 * negotiation (ws_deflate.c). The caller hands over the request's fields one by one, as its
 * parser holds them; nothing is copied but the Sec-WebSocket-Extensions lines (joined). */
#include <string.h>

#include <openssl/evp.h>

#include "server/proto/ws.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int pp_ws_accept_key(const uint8_t *key, size_t key_len, char out[29]) {
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int dlen = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) && EVP_DigestUpdate(ctx, key, key_len) &&
           EVP_DigestUpdate(ctx, ws_guid, sizeof ws_guid - 1) &&
           EVP_DigestFinal_ex(ctx, digest, &dlen) && dlen == 20;
  EVP_MD_CTX_free(ctx);
  if (!ok) return -1;
  EVP_EncodeBlock((unsigned char *)out, digest, 20); /* 28 characters and a NUL */
  return 0;
}

static int lower(int c) {
  return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int name_is(const uint8_t *n, size_t len, const char *word) {
  if (len != strlen(word)) return 0;
  for (size_t i = 0; i < len; i++)
    if (lower(n[i]) != word[i]) return 0;
  return 1;
}

static void trim(const uint8_t **v, size_t *n) {
  while (*n && (**v == ' ' || **v == '\t')) {
    (*v)++;
    (*n)--;
  }
  while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
    (*n)--;
}

/* 1 if the comma-separated list v names token (case-insensitive; empty elements skipped). */
static int list_has(const uint8_t *v, size_t n, const char *token) {
  size_t i = 0;
  while (i < n) {
    size_t start = i;
    while (i < n && v[i] != ',')
      i++;
    const uint8_t *e = v + start;
    size_t el = i - start;
    trim(&e, &el);
    if (name_is(e, el, token)) return 1;
    i++;
  }
  return 0;
}

static int b64_char(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

/* RFC 6455 §4.2.1 item 5: base64 of 16 bytes is 22 characters and "==". */
static int key_ok(const uint8_t *k, size_t n) {
  if (n != 24 || k[22] != '=' || k[23] != '=') return 0;
  for (size_t i = 0; i < 22; i++)
    if (!b64_char(k[i])) return 0;
  return 1;
}

void pp_ws_handshake_init(pp_ws_handshake *hs, pp_ws_hs_kind kind) {
  memset(hs, 0, sizeof *hs);
  hs->kind = kind;
  pp_buf_init(&hs->extensions);
}

void pp_ws_handshake_dispose(pp_ws_handshake *hs) {
  pp_buf_dispose(&hs->extensions);
}

void pp_ws_handshake_request_line(pp_ws_handshake *hs, const uint8_t *method, size_t len,
                                  int http_major, int http_minor) {
  hs->method = method;
  hs->method_len = len;
  hs->http_major = http_major;
  hs->http_minor = http_minor;
}

void pp_ws_handshake_field(pp_ws_handshake *hs, const uint8_t *name, size_t nl,
                           const uint8_t *value, size_t vl) {
  trim(&value, &vl);
  if (name_is(name, nl, "upgrade")) {
    hs->upgrade_seen = 1;
    if (list_has(value, vl, "websocket")) hs->upgrade_websocket = 1;
  } else if (name_is(name, nl, "connection")) {
    hs->connection_seen = 1;
    if (list_has(value, vl, "upgrade")) hs->connection_upgrade = 1;
  } else if (name_is(name, nl, "sec-websocket-key")) {
    hs->key = value;
    hs->key_len = vl;
    hs->key_count++;
  } else if (name_is(name, nl, "sec-websocket-version")) {
    hs->version = value;
    hs->version_len = vl;
    hs->version_count++;
  } else if (name_is(name, nl, "sec-websocket-extensions")) {
    if (hs->extensions.len) pp_buf_append(&hs->extensions, ", ", 2);
    pp_buf_append(&hs->extensions, value, vl);
  } else if (name_is(name, nl, "sec-websocket-protocol")) {
    if (!hs->subprotocols) {
      hs->subprotocols = value;
      hs->subprotocols_len = vl;
    }
  } else if (name_is(name, nl, ":method")) {
    hs->method = value;
    hs->method_len = vl;
  } else if (name_is(name, nl, ":protocol")) {
    hs->protocol = value;
    hs->protocol_len = vl;
  } else if (name_is(name, nl, ":scheme")) {
    hs->scheme_seen = vl > 0;
  } else if (name_is(name, nl, ":path")) {
    hs->path_seen = vl > 0;
  } else if (name_is(name, nl, ":authority")) {
    hs->authority_seen = vl > 0;
  }
}

static int refuse(pp_ws_handshake *hs, int status, const char *reason) {
  hs->status = status;
  hs->reason = reason;
  hs->pmd_accepted = 0;
  hs->extensions_response[0] = 0;
  return status;
}

int pp_ws_handshake_check(pp_ws_handshake *hs, const pp_ws_pmd_config *cfg) {
  hs->status = 0;
  hs->reason = "accepted";
  hs->accept[0] = 0;
  if (hs->kind == PP_WS_HS_HTTP1) {
    if (hs->method_len != 3 || memcmp(hs->method, "GET", 3))
      return refuse(hs, 400, "a WebSocket handshake is a GET (RFC 6455 §4.2.1)");
    if (hs->http_major != 1 || hs->http_minor < 1)
      return refuse(hs, 400, "a WebSocket handshake needs HTTP/1.1 (RFC 6455 §4.2.1)");
    if (!hs->upgrade_websocket)
      return refuse(hs, 400, "Upgrade does not name websocket (RFC 6455 §4.2.1)");
    if (!hs->connection_upgrade)
      return refuse(hs, 400, "Connection does not name upgrade (RFC 6455 §4.2.1)");
  } else {
    if (hs->method_len != 7 || !hs->method || memcmp(hs->method, "CONNECT", 7))
      return refuse(hs, 400, "extended CONNECT needs :method CONNECT (RFC 8441 §4)");
    if (!hs->protocol) return refuse(hs, 400, "extended CONNECT without :protocol (RFC 8441 §4)");
    if (!name_is(hs->protocol, hs->protocol_len, "websocket"))
      return refuse(hs, 400, ":protocol is not websocket (RFC 8441 §4)");
    if (!hs->scheme_seen || !hs->path_seen)
      return refuse(hs, 400, "extended CONNECT needs :scheme and :path (RFC 8441 §4)");
    if (!hs->authority_seen)
      return refuse(hs, 400, "extended CONNECT needs :authority (RFC 8441 §5)");
    if (hs->upgrade_seen || hs->connection_seen)
      return refuse(hs, 400, "Upgrade / Connection are connection-specific (RFC 9113 §8.2.2)");
  }
  if (hs->version_count > 1)
    return refuse(hs, 400, "more than one Sec-WebSocket-Version (RFC 6455 §4.2.1)");
  if (hs->version_count == 0 || hs->version_len != 2 || memcmp(hs->version, "13", 2))
    return refuse(hs, 426, "Sec-WebSocket-Version is not 13 (RFC 6455 §4.4)");
  if (hs->kind == PP_WS_HS_HTTP1) {
    if (hs->key_count != 1)
      return refuse(hs, 400, "not exactly one Sec-WebSocket-Key (RFC 6455 §4.2.1)");
    if (!key_ok(hs->key, hs->key_len))
      return refuse(hs, 400, "Sec-WebSocket-Key is not base64 of 16 bytes (RFC 6455 §4.2.1)");
    if (pp_ws_accept_key(hs->key, hs->key_len, hs->accept))
      return refuse(hs, 500, "SHA-1 unavailable");
  }
  hs->pmd_accepted = 0;
  hs->extensions_response[0] = 0;
  if (hs->extensions.len) {
    int rc = pp_ws_pmd_negotiate(cfg, (const char *)hs->extensions.data, hs->extensions.len,
                                 &hs->pmd, hs->extensions_response, sizeof hs->extensions_response);
    if (rc < 0) return refuse(hs, 400, "malformed Sec-WebSocket-Extensions (RFC 6455 §9.1)");
    hs->pmd_accepted = rc == 1;
  }
  return 0;
}

void pp_ws_handshake_response_fields(const pp_ws_handshake *hs, pp_buf *out) {
  if (hs->status == 426) {
    pp_buf_append_str(out, "Sec-WebSocket-Version: 13\r\n");
    return;
  }
  if (hs->status != 0) return;
  if (hs->kind == PP_WS_HS_HTTP1) {
    pp_buf_append_str(out, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ");
    pp_buf_append_str(out, hs->accept);
    pp_buf_append_str(out, "\r\n");
  }
  if (hs->pmd_accepted) {
    pp_buf_append_str(out, "Sec-WebSocket-Extensions: ");
    pp_buf_append_str(out, hs->extensions_response);
    pp_buf_append_str(out, "\r\n");
  }
}
