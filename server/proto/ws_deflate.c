/* permessage-deflate (RFC 7692) for server/proto/ws.h: the negotiation of the extension's
 * parameters from Sec-WebSocket-Extensions, and the zlib streams that inflate what a client
 * sends (bounded: the inflater is handed at most the room left under the message limit plus
 * one byte, so a deflate bomb stops after max_message_bytes + 1 bytes of output) and deflate
 * what the server sends (raw DEFLATE, Z_SYNC_FLUSH, the 00 00 ff ff tail removed).
 *
 * Streams are allocated on first use and, for a side that resets after every message
 * (no_context_takeover), can be freed between messages (pp_ws_trim), which is what lets many
 * idle connections keep compression without zlib's ~300 KiB per connection. */
#include <string.h>

#include "server/proto/ws_int.h"

/* --- negotiation -------------------------------------------------------------------- */

void pp_ws_pmd_config_default(pp_ws_pmd_config *c) {
  c->enabled = 1;
  c->server_max_window_bits = 15;
  c->server_no_context_takeover = 0;
  c->client_max_window_bits = 15;
  c->client_no_context_takeover = 0;
  c->compress_min_bytes = 64;
}

static int is_tchar(uint8_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static void skip_ows(const char *v, size_t n, size_t *i) {
  while (*i < n && (v[*i] == ' ' || v[*i] == '\t'))
    (*i)++;
}

/* A token at *i; returns its length (0 if none). */
static size_t read_token(const char *v, size_t n, size_t *i) {
  size_t start = *i;
  while (*i < n && is_tchar((uint8_t)v[*i]))
    (*i)++;
  return *i - start;
}

static int token_is(const char *t, size_t n, const char *word) {
  size_t wl = strlen(word);
  if (n != wl) return 0;
  for (size_t k = 0; k < n; k++) {
    char c = t[k];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[k]) return 0;
  }
  return 1;
}

/* A window-bits value: 8..15, decimal digits, no leading zero (RFC 7692 §7.1.2). */
static int window_bits(const char *v, size_t n) {
  if (n == 1 && v[0] >= '8' && v[0] <= '9') return v[0] - '0';
  if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') return 10 + v[1] - '0';
  return -1;
}

typedef struct offer {
  int valid; /* 0 once a rule declines it */
  int server_nct, client_nct;
  int server_bits; /* 0 absent */
  int client_bits; /* 0 absent, -1 present without a value */
} offer;

static void offer_param(offer *o, const char *name, size_t nl, const char *val, size_t vl,
                        int has_val) {
  if (token_is(name, nl, "server_no_context_takeover")) {
    if (o->server_nct || has_val) o->valid = 0;
    o->server_nct = 1;
  } else if (token_is(name, nl, "client_no_context_takeover")) {
    if (o->client_nct || has_val) o->valid = 0;
    o->client_nct = 1;
  } else if (token_is(name, nl, "server_max_window_bits")) {
    int b = has_val ? window_bits(val, vl) : -1;
    if (o->server_bits || b < 0) o->valid = 0;
    o->server_bits = b < 0 ? 1 : b;
  } else if (token_is(name, nl, "client_max_window_bits")) {
    int b = has_val ? window_bits(val, vl) : -1;
    if (o->client_bits || (has_val && b < 0)) o->valid = 0;
    o->client_bits = has_val ? (b < 0 ? 1 : b) : -1;
  } else {
    o->valid = 0; /* a parameter RFC 7692 does not define for an offer */
  }
}

/* Decides on a valid offer: fills params and the response; returns 0 if declined. */
static int accept_offer(const pp_ws_pmd_config *cfg, const offer *o, pp_ws_pmd_params *pp,
                        char *resp, size_t cap) {
  int our_bits = cfg->server_max_window_bits;
  if (our_bits < 9) our_bits = 9;
  if (our_bits > 15) our_bits = 15;
  if (o->server_bits && o->server_bits < our_bits) our_bits = o->server_bits;
  if (our_bits < 9) return 0; /* server_max_window_bits=8: zlib cannot keep to it */
  int client_bits = 15;
  int ask_client_bits = 0;
  int cfg_client = cfg->client_max_window_bits;
  if (cfg_client < 8) cfg_client = 8;
  if (cfg_client > 15) cfg_client = 15;
  if (o->client_bits) { /* the client allows us to name its window (§7.1.2.2) */
    int offered = o->client_bits > 0 ? o->client_bits : 15;
    client_bits = cfg_client < offered ? cfg_client : offered;
    ask_client_bits = client_bits < 15 || o->client_bits > 0;
  }
  pp->server_no_context_takeover = o->server_nct || cfg->server_no_context_takeover;
  pp->client_no_context_takeover = o->client_nct || cfg->client_no_context_takeover;
  pp->server_max_window_bits = our_bits;
  pp->client_max_window_bits = client_bits;
  int n = snprintf(resp, cap, "permessage-deflate%s%s",
                   pp->server_no_context_takeover ? "; server_no_context_takeover" : "",
                   pp->client_no_context_takeover ? "; client_no_context_takeover" : "");
  if (n < 0 || (size_t)n >= cap) return 0;
  /* server_max_window_bits is answered when offered (§7.1.2.1) or when ours is smaller. */
  if (o->server_bits || our_bits < 15) {
    int m = snprintf(resp + n, cap - (size_t)n, "; server_max_window_bits=%d", our_bits);
    if (m < 0 || (size_t)m >= cap - (size_t)n) return 0;
    n += m;
  }
  if (ask_client_bits) {
    int m = snprintf(resp + n, cap - (size_t)n, "; client_max_window_bits=%d", client_bits);
    if (m < 0 || (size_t)m >= cap - (size_t)n) return 0;
  }
  return 1;
}

static int negotiate(const pp_ws_pmd_config *cfg, const char *v, size_t n, pp_ws_pmd_params *params,
                     char *resp, size_t resp_cap) {
  int accepted = 0;
  size_t i = 0;
  if (resp_cap) resp[0] = 0;
  for (;;) {
    skip_ows(v, n, &i);
    if (i < n && v[i] == ',') { /* empty list elements are allowed (RFC 9110 §5.6.1) */
      i++;
      continue;
    }
    if (i >= n) break;
    size_t ext_at = i;
    size_t ext_len = read_token(v, n, &i);
    if (!ext_len) return PP_WS_EBADHEADER;
    int is_pmd = token_is(v + ext_at, ext_len, "permessage-deflate");
    offer o = {1, 0, 0, 0, 0};
    skip_ows(v, n, &i);
    while (i < n && v[i] == ';') {
      i++;
      skip_ows(v, n, &i);
      size_t name_at = i;
      size_t name_len = read_token(v, n, &i);
      if (!name_len) return PP_WS_EBADHEADER;
      skip_ows(v, n, &i);
      char val[64];
      size_t vl = 0;
      int has_val = 0;
      if (i < n && v[i] == '=') {
        has_val = 1;
        i++;
        skip_ows(v, n, &i);
        if (i < n && v[i] == '"') { /* quoted-string: unescaped, it must be a token (§9.1) */
          i++;
          int closed = 0;
          while (i < n) {
            char c = v[i++];
            if (c == '"') {
              closed = 1;
              break;
            }
            if (c == '\\') {
              if (i >= n) return PP_WS_EBADHEADER;
              c = v[i++];
            }
            if (!is_tchar((uint8_t)c)) return PP_WS_EBADHEADER;
            if (vl < sizeof val) val[vl] = c;
            vl++;
          }
          if (!closed || vl == 0) return PP_WS_EBADHEADER;
        } else {
          size_t at = i;
          vl = read_token(v, n, &i);
          if (!vl) return PP_WS_EBADHEADER;
          memcpy(val, v + at, vl < sizeof val ? vl : sizeof val);
        }
        if (vl > sizeof val) vl = sizeof val; /* too long for any valid value anyway */
        skip_ows(v, n, &i);
      }
      if (is_pmd) offer_param(&o, v + name_at, name_len, val, vl, has_val);
    }
    if (i < n && v[i] != ',') return PP_WS_EBADHEADER;
    if (is_pmd && o.valid && !accepted && cfg && cfg->enabled)
      accepted = accept_offer(cfg, &o, params, resp, resp_cap);
  }
  return accepted;
}

int pp_ws_pmd_negotiate(const pp_ws_pmd_config *cfg, const char *v, size_t n,
                        pp_ws_pmd_params *params, char *resp, size_t resp_cap) {
  int rc = negotiate(cfg, v, n, params, resp, resp_cap);
  /* a malformed value after an accepted offer still refuses: no response is left behind */
  if (rc != 1 && resp_cap) resp[0] = 0;
  return rc;
}

/* --- streams ------------------------------------------------------------------------ */

void pp_ws__pmd_init(struct pp_ws_pmd *p, const pp_ws_pmd_params *params) {
  memset(p, 0, sizeof *p);
  p->params = *params;
  pp_buf_init(&p->scratch);
}

void pp_ws__pmd_dispose(struct pp_ws_pmd *p) {
  if (p->inflater_ready) inflateEnd(&p->inflater);
  if (p->deflater_ready) deflateEnd(&p->deflater);
  p->inflater_ready = p->deflater_ready = 0;
  pp_buf_dispose(&p->scratch);
}

void pp_ws__pmd_trim(struct pp_ws_pmd *p) {
  if (p->inflater_ready && p->params.client_no_context_takeover) {
    inflateEnd(&p->inflater);
    p->inflater_ready = 0;
  }
  if (p->deflater_ready && p->params.server_no_context_takeover) {
    deflateEnd(&p->deflater);
    p->deflater_ready = 0;
  }
  pp_buf_dispose(&p->scratch);
}

static int inflater_ready(struct pp_ws_pmd *p) {
  if (p->inflater_ready) return 1;
  memset(&p->inflater, 0, sizeof p->inflater);
  /* A window at least as large as the client's decodes its stream. 9 at least: a zlib-based
   * client asked for 8 compresses with 9 (zlib's raw deflate cannot do 8). */
  int bits = p->params.client_max_window_bits;
  if (bits < 9) bits = 9;
  if (bits > 15) bits = 15;
  if (inflateInit2(&p->inflater, -bits) != Z_OK) return 0;
  p->inflater_ready = 1;
  return 1;
}

int pp_ws__inflate(struct pp_ws_pmd *p, pp_buf *msg, uint64_t max, const uint8_t *in, size_t n) {
  if (!inflater_ready(p)) return PP_WS_CLOSE_INTERNAL_ERROR;
  p->inflate_in += n;
  /* After a final block (BFINAL) the DEFLATE stream is over: what follows in this message
   * (the 00 00 ff ff tail) is not inflated (RFC 7692 §7.2.3.3 allows either ending). */
  if (p->inflate_ended || n == 0) return 0;
  z_stream *z = &p->inflater;
  z->next_in = (Bytef *)in;
  z->avail_in = (uInt)n;
  for (;;) {
    /* At most the room under the limit, plus one byte that shows it was passed. */
    uint64_t room = max + 1 - msg->len;
    size_t chunk = room < 16384 ? (size_t)room : 16384;
    pp_buf_reserve(msg, chunk);
    z->next_out = msg->data + msg->len;
    z->avail_out = (uInt)chunk;
    int rc = inflate(z, Z_SYNC_FLUSH);
    msg->len += chunk - z->avail_out;
    if (msg->len > max) return PP_WS_CLOSE_TOO_BIG;
    if (rc == Z_STREAM_END) {
      p->inflate_ended = 1;
      if (inflateReset(z) != Z_OK) return PP_WS_CLOSE_INTERNAL_ERROR;
      return 0;
    }
    if (rc == Z_MEM_ERROR) return PP_WS_CLOSE_INTERNAL_ERROR;
    if (rc != Z_OK && rc != Z_BUF_ERROR) return PP_WS_CLOSE_INVALID_PAYLOAD;
    /* All input taken and the output not full: zlib has nothing more to give. */
    if (z->avail_in == 0 && z->avail_out != 0) return 0;
    if (rc == Z_BUF_ERROR && z->avail_out != 0) return 0; /* no progress possible */
  }
}

int pp_ws__inflate_finish(struct pp_ws_pmd *p, pp_buf *msg, uint64_t max) {
  static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
  int code = pp_ws__inflate(p, msg, max, tail, 4);
  int ended = p->inflate_ended;
  p->inflate_ended = 0;
  p->inflate_in = 0;
  if (code) return code;
  /* With the tail inflated the message must end on a block boundary (zlib's data_type bit 7:
   * waiting for the next block's header). A payload that stops inside a block would make the
   * next message's bytes continue it. */
  if (!ended && !(p->inflater.data_type & 128)) return PP_WS_CLOSE_INVALID_PAYLOAD;
  if (p->params.client_no_context_takeover && p->inflater_ready) {
    if (inflateReset(&p->inflater) != Z_OK) return PP_WS_CLOSE_INTERNAL_ERROR;
  }
  return 0;
}

int pp_ws__deflate(struct pp_ws_pmd *p, const uint8_t *in, size_t n) {
  if (!p->deflater_ready) {
    memset(&p->deflater, 0, sizeof p->deflater);
    if (deflateInit2(&p->deflater, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                     -p->params.server_max_window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return PP_WS_EZLIB;
    p->deflater_ready = 1;
  }
  z_stream *z = &p->deflater;
  if (n > 0x7FFFFFFF) return PP_WS_EINVAL; /* zlib counts in uInt */
  p->scratch.len = 0;
  z->next_in = (Bytef *)in;
  z->avail_in = (uInt)n;
  for (;;) {
    size_t chunk = deflateBound(z, z->avail_in) + 16;
    pp_buf_reserve(&p->scratch, chunk);
    z->next_out = p->scratch.data + p->scratch.len;
    z->avail_out = (uInt)chunk;
    int rc = deflate(z, Z_SYNC_FLUSH);
    p->scratch.len += chunk - z->avail_out;
    if (rc != Z_OK && rc != Z_BUF_ERROR) return PP_WS_EZLIB;
    if (z->avail_out != 0 && z->avail_in == 0) break;
  }
  /* A sync flush ends in an empty stored block, 00 00 ff ff: RFC 7692 §7.2.1 removes it. An
   * empty message right after a flush makes no output at all; it is sent as one 00 byte (an
   * empty block's header, which the receiver's appended tail completes: §7.2.3.6). */
  if (p->scratch.len == 0) {
    pp_buf_append(&p->scratch, "", 1);
    goto done;
  }
  if (p->scratch.len < 4 || memcmp(p->scratch.data + p->scratch.len - 4, "\x00\x00\xff\xff", 4))
    return PP_WS_EZLIB;
  p->scratch.len -= 4;
done:
  if (p->params.server_no_context_takeover && deflateReset(z) != Z_OK) return PP_WS_EZLIB;
  return 0;
}
