/* The record format of wal.h: CRC32C, framing, the tail-classifying reader and the payload
 * codec. */
#include <string.h>

#include "muster/errno.h"

#include "wal.h"

/* ---------------------------------------------------------------------------------------------
 * CRC32C, slicing-by-8 over tables built on first use
 */

static uint32_t crc_tab[8][256];
static int crc_ready;

static void crc_init(void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_tab[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
  crc_ready = 1;
}

uint32_t wal_crc32c(uint32_t crc, const void *p, size_t n)
{
  if (!crc_ready)
    crc_init();
  const unsigned char *s = p;
  crc = ~crc;
  while (n >= 8) {
    uint32_t lo =
        crc ^ ((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24);
    uint32_t hi =
        (uint32_t)s[4] | (uint32_t)s[5] << 8 | (uint32_t)s[6] << 16 | (uint32_t)s[7] << 24;
    crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
          crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
          crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
    s += 8;
    n -= 8;
  }
  while (n-- > 0)
    crc = crc_tab[0][(crc ^ *s++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* As LevelDB does: a CRC stored next to data that is itself CRC'd is masked. */
static uint32_t mask(uint32_t c)
{
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---------------------------------------------------------------------------------------------
 * Framing
 */

static void le32(unsigned char *p, uint32_t v)
{
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

static uint32_t rd32(const unsigned char *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

int wal_frame(struct mu_buf *out, const void *payload, size_t n)
{
  if (n > WAL_MAX_RECORD)
    return MU_E2BIG;
  unsigned char h[WAL_HDR];
  le32(h, (uint32_t)n);
  le32(h + 4, mask(wal_crc32c(0, h, 4)));
  le32(h + 8, mask(wal_crc32c(0, payload, n)));
  size_t before = out->len;
  if (mu_buf_append(out, h, sizeof(h)) != 0)
    return MU_E2BIG;
  if (mu_buf_append(out, payload, n) != 0) {
    out->len = before;
    return MU_E2BIG;
  }
  return 0;
}

void wal_reader_init(struct wal_reader *r, const void *data, size_t size)
{
  r->data = data;
  r->size = size;
  r->off = 0;
  r->why = NULL;
  r->padding = 0;
}

/* Whether the bytes from `from` to `to` (at most the end of the data) are all zeros. */
static int zeros(const struct wal_reader *r, size_t from, size_t to)
{
  if (to > r->size)
    to = r->size;
  for (size_t i = from; i < to; i++)
    if (r->data[i] != 0)
      return 0;
  return 1;
}

#define SECTOR 512

/* Whether a record that does not check out at r->off, spanning `n` bytes, is a write the disk
 * did not finish rather than damage: in a segment whose space was zeroed and synced before it
 * was written (persist/sync.c), the sectors of an unfinished write may reach the disk in any
 * order, and the ones that did not still hold zeros: a zeroed header, a whole zeroed sector
 * among the record's (as etcd's log reader decides), or nothing but zeros after it. */
static int unfinished(const struct wal_reader *r, size_t n)
{
  size_t from = r->off, to = r->off + n > r->size ? r->size : r->off + n;
  if (zeros(r, from, from + WAL_HDR) || zeros(r, to, r->size)) /* or: only zeros after it */
    return 1;
  for (size_t sec = from - from % SECTOR; sec < to; sec += SECTOR)
    if (zeros(r, sec, sec + SECTOR))
      return 1;
  return 0;
}

int wal_read(struct wal_reader *r, const unsigned char **payload, size_t *len)
{
  size_t rem = r->size - r->off;
  const unsigned char *h = r->data + r->off;
  if (rem == 0)
    return WAL_END;
  if (rem < WAL_HDR) {
    r->why = "a record header cut short at the end of the file";
    return WAL_TORN;
  }
  uint32_t n = rd32(h);
  if (rd32(h + 4) != mask(wal_crc32c(0, h, 4)) || n > WAL_MAX_RECORD) {
    if (zeros(r, r->off, r->size)) {
      r->why = "zeros to the end of the file";
      r->padding = 1;
      return WAL_TORN;
    }
    if (unfinished(r, WAL_HDR)) {
      r->why = "a record header in sectors the disk never wrote";
      return WAL_TORN;
    }
    r->why = "a damaged record header (length checksum mismatch)";
    return WAL_CORRUPT;
  }
  if ((size_t)n > rem - WAL_HDR) {
    r->why = "a record cut short at the end of the file";
    return WAL_TORN;
  }
  if (rd32(h + 8) != mask(wal_crc32c(0, h + WAL_HDR, n))) {
    if ((size_t)n == rem - WAL_HDR) {
      r->why = "a checksum mismatch in the last record";
      return WAL_TORN;
    }
    if (unfinished(r, WAL_HDR + (size_t)n)) {
      r->why = "a record in sectors the disk never wrote";
      return WAL_TORN;
    }
    r->why = "a checksum mismatch followed by more records";
    return WAL_CORRUPT;
  }
  *payload = h + WAL_HDR;
  *len = n;
  r->off += WAL_HDR + (size_t)n;
  return WAL_RECORD;
}

/* ---------------------------------------------------------------------------------------------
 * Payloads: u8 type, u8 action, u8 flags, u64 index, u64 created, u64 aux, i64 expire_ns,
 * then key, value, json, each as u32 length + bytes.
 */

#define REC_FIXED (3 + 8 * 4 + 4 * 3)

static void put64(unsigned char *p, uint64_t v)
{
  le32(p, (uint32_t)v);
  le32(p + 4, (uint32_t)(v >> 32));
}

int wal_rec_put(struct mu_buf *out, const struct wal_rec *r)
{
  size_t n = REC_FIXED + (size_t)r->key_len + r->value_len + r->json_len;
  if (n > WAL_MAX_RECORD)
    return MU_E2BIG;
  unsigned char fixed[REC_FIXED - 12];
  fixed[0] = r->type;
  fixed[1] = r->action;
  fixed[2] = r->flags;
  put64(fixed + 3, r->index);
  put64(fixed + 11, r->created);
  put64(fixed + 19, r->aux);
  put64(fixed + 27, (uint64_t)r->expire_ns);
  unsigned char h[WAL_HDR], l[4];
  le32(h, (uint32_t)n);
  le32(h + 4, mask(wal_crc32c(0, h, 4)));
  uint32_t crc = wal_crc32c(0, fixed, sizeof(fixed));
  const char *parts[3] = {r->key, r->value, r->json};
  uint32_t lens[3] = {r->key_len, r->value_len, r->json_len};
  for (int i = 0; i < 3; i++) {
    le32(l, lens[i]);
    crc = wal_crc32c(crc, l, 4);
    if (lens[i] > 0)
      crc = wal_crc32c(crc, parts[i], lens[i]);
  }
  le32(h + 8, mask(crc));
  size_t before = out->len;
  int rc = mu_buf_append(out, h, sizeof(h));
  if (rc == 0)
    rc = mu_buf_append(out, fixed, sizeof(fixed));
  for (int i = 0; i < 3 && rc == 0; i++) {
    le32(l, lens[i]);
    rc = mu_buf_append(out, l, 4);
    if (rc == 0 && lens[i] > 0)
      rc = mu_buf_append(out, parts[i], lens[i]);
  }
  if (rc != 0) {
    out->len = before;
    return MU_E2BIG;
  }
  return 0;
}

int wal_rec_decode(const unsigned char *p, size_t n, struct wal_rec *r)
{
  memset(r, 0, sizeof(*r));
  if (n < REC_FIXED)
    return MU_EPARSE;
  r->type = p[0];
  r->action = p[1];
  r->flags = p[2];
  r->index = rd64(p + 3);
  r->created = rd64(p + 11);
  r->aux = rd64(p + 19);
  r->expire_ns = (int64_t)rd64(p + 27);
  if (r->type < WAL_REC_EVENT || r->type > WAL_REC_RDZV_CHANGE)
    return MU_EPARSE;
  size_t off = REC_FIXED - 12;
  const char **parts[3] = {&r->key, &r->value, &r->json};
  uint32_t *lens[3] = {&r->key_len, &r->value_len, &r->json_len};
  for (int i = 0; i < 3; i++) {
    if (n - off < 4)
      return MU_EPARSE;
    uint32_t l = rd32(p + off);
    off += 4;
    if (l > n - off)
      return MU_EPARSE;
    *parts[i] = (const char *)p + off;
    *lens[i] = l;
    off += l;
  }
  return off == n ? 0 : MU_EPARSE;
}
