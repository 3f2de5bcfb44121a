/* The PROXY protocol header, versions 1 and 2 (see proxy.h). */
#include "server/proto/proxy.h"

#include <arpa/inet.h>
#include <string.h>

static const uint8_t V2_SIG[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char V1_SIG[6] = "PROXY ";

static pp_proxy_rc fail(pp_proxy_info *out, const char *why) {
  out->error = why;
  return PP_PROXY_ERROR;
}

/* A decimal port: 1-5 digits, no leading zero (but "0"), at most 65535. */
static int parse_port(const char *s, size_t n, uint16_t *out) {
  if (n == 0 || n > 5 || (n > 1 && s[0] == '0')) return -1;
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (uint32_t)(s[i] - '0');
  }
  if (v > 65535) return -1;
  *out = (uint16_t)v;
  return 0;
}

/* An address of family af written as the spec wants (inet_pton's forms), copied to out. */
static int parse_addr(int af, const char *s, size_t n, char *out) {
  char tmp[46];
  uint8_t bin[16];
  if (n == 0 || n >= sizeof tmp) return -1;
  memcpy(tmp, s, n);
  tmp[n] = 0;
  if (inet_pton(af, tmp, bin) != 1) return -1;
  memcpy(out, tmp, n + 1);
  return 0;
}

static pp_proxy_rc parse_v1(const uint8_t *data, size_t len, pp_proxy_info *out) {
  /* the line ends at the first CRLF, within PP_PROXY_V1_MAX bytes */
  size_t end = 0;
  while (end < len && end < PP_PROXY_V1_MAX && data[end] != '\n')
    end++;
  if (end == len) return len >= PP_PROXY_V1_MAX ? fail(out, "v1 line too long") : PP_PROXY_MORE;
  if (end == PP_PROXY_V1_MAX) return fail(out, "v1 line too long");
  if (end == 0 || data[end - 1] != '\r') return fail(out, "v1 line not ended by CRLF");
  const char *p = (const char *)data + sizeof V1_SIG;
  const char *e = (const char *)data + end - 1; /* at the CR */
  for (const char *q = (const char *)data; q < e; q++)
    if (*q == '\r' || *q == '\0') return fail(out, "v1 line with CR or NUL inside");
  out->version = 1;
  out->header_len = end + 1;
  /* the fields, separated by single spaces */
  const char *f[6];
  size_t fl[6];
  int nf = 0;
  const char *s = p;
  while (nf < 6) {
    const char *sp = memchr(s, ' ', (size_t)(e - s));
    const char *fe = sp ? sp : e;
    f[nf] = s, fl[nf] = (size_t)(fe - s);
    nf++;
    if (!sp) break;
    s = sp + 1;
  }
  if (fl[0] == 7 && !memcmp(f[0], "UNKNOWN", 7)) { /* the rest of the line is ignored */
    out->local = 1;
    return PP_PROXY_DONE;
  }
  int af;
  if (fl[0] == 4 && !memcmp(f[0], "TCP4", 4))
    af = AF_INET, out->family = 4;
  else if (fl[0] == 4 && !memcmp(f[0], "TCP6", 4))
    af = AF_INET6, out->family = 6;
  else
    return fail(out, "v1 protocol is not TCP4, TCP6 or UNKNOWN");
  if (nf != 5 || memchr(f[4], ' ', fl[4])) return fail(out, "v1 line does not have 5 fields");
  if (parse_addr(af, f[1], fl[1], out->src) || parse_addr(af, f[2], fl[2], out->dst))
    return fail(out, "v1 address invalid for its protocol");
  if (parse_port(f[3], fl[3], &out->src_port) || parse_port(f[4], fl[4], &out->dst_port))
    return fail(out, "v1 port invalid");
  return PP_PROXY_DONE;
}

static pp_proxy_rc parse_v2(const uint8_t *data, size_t len, pp_proxy_info *out) {
  if (len < 16) {
    /* what there is must already be right: the version and command, then the family */
    if (len > 12 && (data[12] >> 4) != 2) return fail(out, "v2 version is not 2");
    if (len > 12 && (data[12] & 0x0f) > 1) return fail(out, "v2 command is not LOCAL or PROXY");
    return PP_PROXY_MORE;
  }
  if ((data[12] >> 4) != 2) return fail(out, "v2 version is not 2");
  int command = data[12] & 0x0f;
  if (command > 1) return fail(out, "v2 command is not LOCAL or PROXY");
  int fam = data[13] >> 4, proto = data[13] & 0x0f;
  if (fam > 3 || proto > 2) return fail(out, "v2 address family or protocol unknown");
  size_t body = (size_t)data[14] << 8 | data[15];
  if (16 + body > PP_PROXY_V2_MAX) return fail(out, "v2 header longer than we accept");
  size_t need = fam == 1 ? 12 : fam == 2 ? 36 : fam == 3 ? 216 : 0;
  if (body < need) return fail(out, "v2 length shorter than its addresses");
  if (len < 16 + body) return PP_PROXY_MORE;
  out->version = 2;
  out->header_len = 16 + body;
  /* TLVs after the addresses: each type (1), length (2), value; they must fill the rest */
  size_t off = 16 + need, end = 16 + body;
  while (off < end) {
    if (end - off < 3) return fail(out, "v2 TLV truncated");
    size_t tl = (size_t)data[off + 1] << 8 | data[off + 2];
    if (end - off - 3 < tl) return fail(out, "v2 TLV longer than the header");
    off += 3 + tl;
    out->tlv_count++;
  }
  /* LOCAL (a health check by the proxy itself), UNSPEC, unix sockets and DGRAM: the peer's
   * own address stays (the spec: the receiver uses the real connection's addresses) */
  if (command == 0 || proto != 1 || (fam != 1 && fam != 2)) {
    out->local = 1;
    return PP_PROXY_DONE;
  }
  const uint8_t *a = data + 16;
  int af = fam == 1 ? AF_INET : AF_INET6;
  size_t al = fam == 1 ? 4 : 16;
  out->family = fam == 1 ? 4 : 6;
  inet_ntop(af, a, out->src, sizeof out->src);
  inet_ntop(af, a + al, out->dst, sizeof out->dst);
  out->src_port = (uint16_t)(a[2 * al] << 8 | a[2 * al + 1]);
  out->dst_port = (uint16_t)(a[2 * al + 2] << 8 | a[2 * al + 3]);
  return PP_PROXY_DONE;
}

pp_proxy_rc pp_proxy_parse(const uint8_t *data, size_t len, unsigned accept, pp_proxy_info *out) {
  memset(out, 0, sizeof *out);
  if (len == 0) return PP_PROXY_MORE;
  /* the first byte tells the versions apart: 'P' (v1) or CR (v2) */
  if (data[0] == 'P' && (accept & PP_PROXY_V1)) {
    size_t n = len < sizeof V1_SIG ? len : sizeof V1_SIG;
    if (memcmp(data, V1_SIG, n)) return fail(out, "no PROXY header (v1 signature)");
    if (len <= sizeof V1_SIG) return PP_PROXY_MORE;
    return parse_v1(data, len, out);
  }
  if (data[0] == 0x0d && (accept & PP_PROXY_V2)) {
    size_t n = len < sizeof V2_SIG ? len : sizeof V2_SIG;
    if (memcmp(data, V2_SIG, n)) return fail(out, "no PROXY header (v2 signature)");
    if (len <= sizeof V2_SIG) return PP_PROXY_MORE;
    return parse_v2(data, len, out);
  }
  return fail(out, accept == PP_PROXY_V1   ? "no PROXY v1 header"
                   : accept == PP_PROXY_V2 ? "no PROXY v2 header"
                                           : "no PROXY header");
}
