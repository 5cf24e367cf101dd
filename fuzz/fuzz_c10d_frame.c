/* libFuzzer target: the TCPStore frame parser (rendezvous/c10d/frame.h) and the key names the
 * c10d layer stores keys under (c10d_key_path(), c10d_key_decode()).
 *
 * Input: byte 0 picks the numbering (bit 0: V2, else legacy) and a small value bound (bits
 * 1-3), byte 1 seeds how the rest is cut into reads; the rest is what a client sent. The frames
 * are parsed once with every byte present, then again with the bytes arriving in pieces (the
 * resumable path a slow client takes). Checked beyond ASan/UBSan: both ways give the same
 * frames and the same verdict; a complete frame lies inside the input and inside its bound;
 * its spans lie inside the frame, in order, within their own bounds, and their number is what
 * the query's count says; a key's store name is one path segment that decodes back to it.
 *
 * Build: CC=clang cmake -DMU_FUZZ=ON ...; run: build-fuzz/fuzz/fuzz_c10d_frame corpus/
 * Seeds: fuzz/corpus/fuzz_c10d_frame/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "c10d_int.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FRAMES 64

struct seen {
  int verdict; /* 1 all frames complete, 0 more needed, < 0 the error */
  size_t nframes;
  uint64_t sig[MAX_FRAMES]; /* a digest of each frame's fields */
};

static uint64_t digest(const struct c10d_frame *f)
{
  uint64_t h = 1469598103934665603ull;
  uint64_t v[5] = {(uint64_t)f->op, f->count, (uint64_t)f->amount, f->u32, f->len};
  for (int i = 0; i < 5; i++)
    h = (h ^ v[i]) * 1099511628211ull;
  for (size_t i = 0; i < f->nspans; i++)
    h = (h ^ (f->spans[i].off * 31 + f->spans[i].len)) * 1099511628211ull;
  return h;
}

/* Checks a complete frame against the input and its limits. */
static void check_frame(const struct c10d_frame *f, const struct c10d_limits *lim, size_t avail)
{
  if (f->len == 0 || f->len > avail || f->len > lim->max_frame)
    __builtin_trap();
  size_t at = 1;
  for (size_t i = 0; i < f->nspans; i++) {
    const struct c10d_span *s = &f->spans[i];
    if (s->off < at + 8 || s->off + s->len > f->len ||
        s->len > (lim->max_key > lim->max_value ? lim->max_key : lim->max_value))
      __builtin_trap();
    at = s->off + s->len;
  }
  size_t per = f->op == C10D_OP_MULTI_SET ? 2 : 1;
  int counted = f->op == C10D_OP_CHECK || f->op == C10D_OP_WAIT || f->op == C10D_OP_MULTI_GET ||
                f->op == C10D_OP_MULTI_SET;
  if (counted && (f->count > lim->max_keys || f->nspans != f->count * per))
    __builtin_trap();
}

/* Parses frames out of p[0..n), `step` bytes made visible at a time (0: all at once). */
static void parse_all(enum c10d_proto proto, const struct c10d_limits *lim, const uint8_t *p,
                      size_t n, size_t step, struct seen *out)
{
  struct c10d_frame f;
  memset(&f, 0, sizeof(f));
  memset(out, 0, sizeof(*out));
  size_t pos = 0, visible = step == 0 ? n : 0;
  for (;;) {
    if (step != 0 && visible < n)
      visible = visible + step < n ? visible + step : n;
    int rc = c10d_frame_parse(&f, proto, lim, p + pos, visible - pos);
    if (rc == 0 && visible < n)
      continue;
    if (rc <= 0) {
      out->verdict = rc;
      break;
    }
    check_frame(&f, lim, visible - pos);
    if (out->nframes < MAX_FRAMES)
      out->sig[out->nframes++] = digest(&f);
    pos += f.len;
    c10d_frame_reset(&f);
    if (pos == n || out->nframes == MAX_FRAMES) {
      out->verdict = 1;
      break;
    }
  }
  c10d_frame_release(&f);
}

/* A key's store name: one clean path segment that decodes to the key. */
static void check_key(const uint8_t *k, size_t n)
{
  struct mu_buf path = MU_BUF_INIT(MU_BUF_UNBOUNDED), back = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  const char *s = c10d_key_path(&path, C10D_DIR, k, n);
  const char *name = s + sizeof(C10D_DIR);
  size_t len = strlen(name);
  if (strncmp(s, C10D_DIR "/", sizeof(C10D_DIR)) != 0 || len == 0 || strchr(name, '/') ||
      strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || len != path.len - sizeof(C10D_DIR))
    __builtin_trap();
  if (c10d_key_decode(name, len, &back) != 0 || back.len != n ||
      (n != 0 && memcmp(back.data, k, n) != 0))
    __builtin_trap();
  mu_buf_release(&path);
  mu_buf_release(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2)
    return 0;
  enum c10d_proto proto = (data[0] & 1) ? C10D_PROTO_V2 : C10D_PROTO_LEGACY;
  struct c10d_limits lim;
  c10d_limits_init(&lim, (uint64_t)1 << (4 + ((data[0] >> 1) & 7) * 2));
  lim.max_frame = lim.max_value + 4096;
  lim.max_keys = 64;
  size_t step = (size_t)(data[1] % 7) + 1;
  const uint8_t *p = data + 2;
  size_t n = size - 2;
  struct seen whole, pieces;
  parse_all(proto, &lim, p, n, 0, &whole);
  parse_all(proto, &lim, p, n, step, &pieces);
  if (whole.verdict != pieces.verdict || whole.nframes != pieces.nframes ||
      memcmp(whole.sig, pieces.sig, whole.nframes * sizeof(whole.sig[0])) != 0)
    __builtin_trap();
  check_key(p, n < 512 ? n : 512);
  return 0;
}
